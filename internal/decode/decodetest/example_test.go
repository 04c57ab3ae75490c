package decodetest_test

import (
	"encoding/json"
	"fmt"

	"github.com/informerkit/informerkit/internal/decode/decodetest"
)

func ExampleServerObject() {
	var obj map[string]interface{}
	if err := json.Unmarshal(decodetest.ServerObject(7), &obj); err != nil {
		fmt.Println(err)
		return
	}
	md := obj["metadata"].(map[string]interface{})
	fmt.Println(obj["kind"], md["name"], len(md["managedFields"].([]interface{})))
	// Output: Widget obj-000007 2
}
