package decode_test

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informerkit/informerkit/internal/decode"
)

func ExampleObject() {
	data := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"7",
		"managedFields":[{"manager":"kubectl","operation":"Apply"}]},"data":{"n":"1"},"size":3,"ratio":0.5}`)
	m, err := decode.Object(data, decode.Options{SkipManagedFields: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	u := &unstructured.Unstructured{Object: m}
	fmt.Println(u.GetName(), u.GetResourceVersion(), len(u.GetManagedFields()))
	fmt.Printf("%T %T\n", m["size"], m["ratio"])

	_, err = decode.Object([]byte(`{"a":1,}`), decode.Options{})
	fmt.Println(decode.IsSyntaxError(err), err)
	// Output:
	// a 7 0
	// int64 float64
	// true invalid character '}' looking for beginning of object key string
}
