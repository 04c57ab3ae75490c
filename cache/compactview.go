package cache

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informerkit/informerkit/internal/treecodec"
)

// A Compact is also a view of its object that reads without decoding it:
// the metadata it keeps (name, namespace, uid, resourceVersion,
// generation, labels, ownerReferences, deletionTimestamp; see
// GetObjectMeta) costs a field load, and any other field is read from the
// encoding by NestedField,
// which skips over everything off its path and decodes only the value it
// returns. genericlister's ListCompact and GetCompact return such views;
// Decode or Shared give the whole object.

// NestedField returns a copy of the value at the path fields of the
// object (as unstructured.NestedFieldCopy would on the decoded object,
// with the same found and error results), read from the encoding: only
// the returned value is decoded, so reading a field costs a scan over the
// fields before it rather than a decode of the object. The caller owns
// the returned maps and slices (its strings share the Compact's
// immutable memory). Safe for concurrent use.
func (c *Compact) NestedField(fields ...string) (interface{}, bool, error) {
	if len(c.enc) < 4 {
		return nil, false, errCorruptEncoding
	}
	r := treecodec.Reader{Enc: c.enc[:len(c.enc)-4]}
	for i, field := range fields {
		at := r.Pos
		if err := r.Unsized(); err != nil {
			return nil, false, err
		}
		if r.Pos >= len(r.Enc) {
			return nil, false, errCorruptEncoding
		}
		switch r.Enc[r.Pos] {
		case treecodec.TagNull:
			return nil, false, nil
		case treecodec.TagMap:
		default:
			r.Pos = at
			v, err := r.Value()
			if err != nil {
				return nil, false, err
			}
			return nil, false, fmt.Errorf("%v accessor error: %v is of the type %T, expected map[string]interface{}",
				jsonPath(fields[:i+1]), v, v)
		}
		found, err := r.SeekLast(field)
		if err != nil || !found {
			return nil, false, err
		}
	}
	v, err := r.Value()
	if err != nil {
		return nil, false, err
	}
	return v, true, nil
}

// jsonPath is how unstructured's accessor errors name a path.
func jsonPath(fields []string) string { return "." + strings.Join(fields, ".") }

// metadata returns an Unstructured holding only metadata.name of the
// object (nothing when the object has no such field or its metadata is
// not a map), so that the getters below answer exactly as the decoded
// object's would.
func (m compactObjectMeta) metadata(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{}}
	if v, found, err := m.c.NestedField("metadata", name); found && err == nil {
		u.Object["metadata"] = map[string]interface{}{name: v}
	}
	return u
}

// The metav1.Object getters of metadata a Compact does not keep read the
// field from the encoding (see NestedField): they answer what the decoded
// object's getters answer, at the cost of a scan.

func (m compactObjectMeta) GetGenerateName() string {
	return m.metadata("generateName").GetGenerateName()
}
func (m compactObjectMeta) GetSelfLink() string { return m.metadata("selfLink").GetSelfLink() }
func (m compactObjectMeta) GetCreationTimestamp() metav1.Time {
	return m.metadata("creationTimestamp").GetCreationTimestamp()
}
func (m compactObjectMeta) GetDeletionGracePeriodSeconds() *int64 {
	return m.metadata("deletionGracePeriodSeconds").GetDeletionGracePeriodSeconds()
}
func (m compactObjectMeta) GetAnnotations() map[string]string {
	return m.metadata("annotations").GetAnnotations()
}
func (m compactObjectMeta) GetFinalizers() []string { return m.metadata("finalizers").GetFinalizers() }
func (m compactObjectMeta) GetManagedFields() []metav1.ManagedFieldsEntry {
	return m.metadata("managedFields").GetManagedFields()
}
