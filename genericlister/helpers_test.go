package genericlister

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"
)

// ownerUIDPath is the field path of the owners' UIDs.
const ownerUIDPath = "metadata.ownerReferences[*].uid"

// fieldIndexers is cache.FieldIndexers of valid paths.
func fieldIndexers(paths ...string) toolscache.Indexers {
	fi, err := ikcache.FieldIndexers(paths...)
	if err != nil {
		panic(err)
	}
	return fi
}

// fieldIndexName is the name of the index cache.FieldIndexers builds for
// path.
func fieldIndexName(path string) string {
	for name := range fieldIndexers(path) {
		return name
	}
	return ""
}

// nestedInt64 reads an integer field of a Compact.
func nestedInt64(c *ikcache.Compact, fields ...string) (int64, bool, error) {
	v, found, err := c.NestedField(fields...)
	if !found || err != nil {
		return 0, found, err
	}
	i, ok := v.(int64)
	if !ok {
		return 0, false, fmt.Errorf("%v is %T, not int64", fields, v)
	}
	return i, true, nil
}

// deepCopy and deepCopies return private copies of a read's results.
func deepCopy(u *unstructured.Unstructured, err error) (*unstructured.Unstructured, error) {
	if err != nil {
		return nil, err
	}
	return u.DeepCopy(), nil
}

func deepCopies(objs []*unstructured.Unstructured, err error) ([]*unstructured.Unstructured, error) {
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, len(objs))
	for i, u := range objs {
		out[i] = u.DeepCopy()
	}
	return out, nil
}
