package codec_test

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/informerkit/informerkit/dynamicinformer/internal/codec"
	"github.com/informerkit/informerkit/internal/decode"
)

func ExampleNegotiatedSerializer() {
	base := dynamic.ConfigFor(&rest.Config{}).NegotiatedSerializer
	ns := codec.NegotiatedSerializer(base, decode.Options{SkipManagedFields: true})
	var json runtime.Serializer
	for _, info := range ns.SupportedMediaTypes() {
		if info.MediaType == runtime.ContentTypeJSON {
			json = info.Serializer
		}
	}
	// A watch event's object: the fast path, managedFields not built.
	obj, _, _ := json.Decode([]byte(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a","managedFields":[{"manager":"m"}]}}`), nil, nil)
	u := obj.(*unstructured.Unstructured)
	fmt.Println(u.GetName(), u.GetManagedFields() == nil)
	// A Status: client-go's decoder, as client-go's dynamic client does.
	obj, _, _ = json.Decode([]byte(`{"apiVersion":"v1","kind":"Status","status":"Failure","code":410,"reason":"Expired"}`), nil, nil)
	fmt.Printf("%T\n", obj)
	// Output:
	// a true
	// *v1.Status
}
