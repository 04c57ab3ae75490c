package decode

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	kjson "sigs.k8s.io/json"
)

// errClass names the class of a decoding error: "" (none), "syntax",
// "type" or "other".
type errClass string

// apimachineryObject decodes data as apimachinery's unstructured JSON
// scheme does for an *unstructured.Unstructured (decodeToUnstructured).
func apimachineryObject(data []byte) (map[string]interface{}, error) {
	m := make(map[string]interface{})
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &m); err != nil {
		return nil, err
	}
	return m, nil
}

func refClass(err error) errClass {
	switch {
	case err == nil:
		return ""
	case isKSyntax(err):
		return "syntax"
	case strings.HasPrefix(err.Error(), "json: cannot unmarshal"):
		return "type"
	}
	return "other"
}

func isKSyntax(err error) bool {
	ok, _ := kjson.SyntaxErrorOffset(err)
	return ok
}

func ourClass(err error) errClass {
	switch {
	case err == nil:
		return ""
	case IsSyntaxError(err):
		return "syntax"
	case IsTypeError(err):
		return "type"
	}
	return "other"
}

// checkSame decodes data both ways (with opts; the reference applies the
// equivalent transforms after decoding) and fails unless results and error
// classes agree.
func checkSame(t testing.TB, data []byte, opts Options) {
	t.Helper()
	want, wantErr := apimachineryObject(data)
	if wantErr == nil {
		applyTransforms(want, opts)
	}
	got, gotErr := Object(data, opts)
	if refClass(wantErr) != ourClass(gotErr) {
		t.Fatalf("input %q: error %v (class %q), apimachinery's %v (class %q)", clip(data), gotErr, ourClass(gotErr), wantErr, refClass(wantErr))
	}
	if wantErr != nil {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("input %q (opts %+v):\n got %#v\nwant %#v", clip(data), opts, got, want)
	}
}

// applyTransforms does to a decoded object what the transforms equivalent
// to opts do (cache.StripManagedFields, cache.DropLastAppliedConfiguration).
func applyTransforms(obj map[string]interface{}, opts Options) {
	md, _ := obj["metadata"].(map[string]interface{})
	if opts.SkipManagedFields {
		delete(md, "managedFields")
	}
	if opts.SkipLastApplied {
		ann, _ := md["annotations"].(map[string]interface{})
		if _, ok := ann[LastAppliedAnnotation]; ok {
			delete(ann, LastAppliedAnnotation)
			if len(ann) == 0 {
				delete(md, "annotations")
			}
		}
	}
}

func clip(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

var allOptions = []Options{{}, {SkipManagedFields: true}, {SkipLastApplied: true}, {SkipManagedFields: true, SkipLastApplied: true}}

// projectObjects reads the objects checked in under testdata/objects.
func projectObjects(t testing.TB) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "objects", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no objects under testdata/objects (%v)", err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = data
	}
	return out
}
