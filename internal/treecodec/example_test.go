package treecodec_test

import (
	"fmt"

	"github.com/informerkit/informerkit/internal/treecodec"
)

func Example() {
	obj := map[string]interface{}{"kind": "ConfigMap", "data": map[string]interface{}{"a": "1"}, "n": int64(3)}
	enc, err := treecodec.Encode(nil, obj)
	if err != nil {
		fmt.Println(err)
		return
	}
	back, err := treecodec.Decode(enc)
	fmt.Println(back["kind"], back["data"], back["n"], err)
	_, err = treecodec.Decode(enc[:len(enc)-5])
	fmt.Println(err != nil)
	// Output:
	// ConfigMap map[a:1] 3 <nil>
	// true
}
