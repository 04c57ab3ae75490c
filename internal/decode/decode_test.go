package decode

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"

	"github.com/informerkit/informerkit/internal/decode/decodetest"
)

// edgeCases are inputs whose decoding differs between JSON libraries:
// numbers, escapes, invalid UTF-8, duplicate keys, nulls, nesting, and
// malformed input of every kind.
var edgeCases = []string{
	// numbers
	`{"a":0,"b":-0,"c":1,"d":-1,"e":255,"f":256,"g":9223372036854775807,"h":-9223372036854775808}`,
	`{"a":9223372036854775808,"b":-9223372036854775809,"c":123456789012345678901234567890}`,
	`{"a":1.0,"b":1e3,"c":1E3,"d":1e+3,"e":1e-3,"f":-1.5e-7,"g":0.1,"h":-0.0,"i":1e-400}`,
	`{"a":1e400}`, `{"a":-1e400}`, `{"a":[1,2,1e309]}`, `{"a":1e308}`,
	`{"a":123456789012345678}`, `{"a":1234567890123456789}`, `{"a":-123456789012345678}`,
	`{"a":01}`, `{"a":1.}`, `{"a":.1}`, `{"a":1e}`, `{"a":1e+}`, `{"a":-}`, `{"a":+1}`, `{"a":0x10}`,
	`{"a":1.5.5}`, `{"a":--1}`, `{"a":NaN}`, `{"a":Infinity}`,
	// strings
	`{"a":"","b":"x","c":"\"\\\/\b\f\n\r\t"}`,
	`{"a":"\u0041\u00e9\u4e2d\ud83d\ude00"}`,
	`{"a":"\ud800","b":"\udc00","c":"\ud800\u0041","d":"\ud800\ud800","e":"\udbff\udfff","f":"\ud800x"}`,
	`{"a":"\u0000","b":"\u001f","c":"\uFFFD","d":"\uFEFF"}`,
	"{\"a\":\"\xff\",\"b\":\"a\xc3\",\"c\":\"\xed\xa0\x80\",\"d\":\"\xf4\x90\x80\x80\",\"e\":\"\xc3\xa9\",\"f\":\"\xef\xbf\xbd\"}",
	"{\"\xff\":1,\"k\xe9y\":2}",
	"{\"a\":\"\x7f\"}",
	"{\"a\":\"\x01\"}", "{\"a\":\"\t\"}", "{\"a\":\"\n\"}",
	`{"a":"\x"}`, `{"a":"\'"}`, `{"a":"\u12"}`, `{"a":"\u12G4"}`, `{"a":"\U0041"}`, `{"a":"abc`, `{"a":"\`,
	`{"\u0061":1,"a":2}`, `{"a\u0000b":1}`, `{"\ud800":1}`,
	// keys, duplicates, nulls, literals
	`{"a":1,"a":2}`, `{"a":{"x":1},"a":{"y":2}}`, `{"a":null}`, `{"a":[null,true,false]}`,
	`{"a":tru}`, `{"a":nul}`, `{"a":True}`, `{"a":falsey}`, `{"A":1,"a":2}`,
	`{}`, `{"a":{}}`, `{"a":[]}`, `{"a":[[]]}`, `{"a":[{}]}`,
	`null`, ` null `, `nul`, `nullx`,
	// top level that is not an object
	`[]`, `[1]`, `"s"`, `1`, `true`, `1e400`, `[1e400]`, `[1,]`, `"x`,
	// structure
	``, ` `, `{`, `}`, `{"a"`, `{"a":`, `{"a":1`, `{"a":1,`, `{"a":1,}`, `{,}`, `{"a" 1}`, `{"a":1 "b":2}`,
	`{1:2}`, `{a:1}`, `{'a':1}`, `{"a":[1 2]}`, `{"a":[,1]}`, `{"a":[1,,2]}`, `{"a":]`, `{"a":1}}`, `{"a":1}x`,
	`{"a":1} {"b":2}`, " \t\r\n{\"a\" \n:\r 1 \t}\n ", "{\"a\":1}\x00", "\x00{}", "\ufeff{}", "{\"a\":1}\f",
	`{"a":1e400,}`, `{"a":1e400`, `{"a":[1e400,"x]}`,
	// skipped fields: present, duplicated, odd types, malformed inside
	`{"metadata":{"managedFields":[{"manager":"m","fieldsV1":{"f:a":{}}}],"name":"x"}}`,
	`{"metadata":{"managedFields":null}}`, `{"metadata":{"managedFields":1e400}}`, `{"metadata":{"managedFields":[1e999]}}`,
	`{"metadata":{"managedFields":[1,}}`, `{"metadata":{"managedFields":"\x"}}`, `{"metadata":{"managedFields":{"a":tru}}}`,
	`{"metadata":{"managedFields":[]},"metadata":{"name":"y","managedFields":{}}}`,
	`{"metadata":[{"managedFields":1}],"managedFields":2,"spec":{"metadata":{"managedFields":3}}}`,
	`{"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}"}}}`,
	`{"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}","a":"b"}}}`,
	`{"metadata":{"annotations":{"kubectl.kubernetes.io\/last-applied-configuration":"{}"}}}`,
	`{"metadata":{"annotations":{}}}`, `{"metadata":{"annotations":null}}`, `{"metadata":{"annotations":"x"}}`,
	`{"metadata":{"annotations":{"a":"b"},"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"x"}}}`,
	`{"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"x"},"annotations":{"a":"b"}}}`,
	`{"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":1e400}}}`,
	`{"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":{"x":[1,2,{"y":null}]}}}}`,
	`{"metadata":null,"metadata":{"managedFields":[]}}`,
	// managed-fields sets shared within an object: repeats, repeats with
	// duplicate keys, numbers out of range, odd types and bad syntax inside
	`{"metadata":{"managedFields":[{"fieldsV1":{"f:a":{".":{},"f:x":{}},"f:b":{".":{},"f:x":{}},"f:c":{ }}},{"fieldsV1":{"f:a":{".":{},"f:x":{}}}}]}}`,
	`{"metadata":{"managedFields":[{"fieldsV1":{"f:a":{"x":1,"x":2},"f:b":{"x":1,"x":2},"f:c":{"x":2}}}]}}`,
	`{"metadata":{"managedFields":[{"fieldsV1":{"f:a":{"x":1e400},"f:b":{"x":1e400}}}]}}`,
	`{"metadata":{"managedFields":[{"fieldsV1":{"f:a":{"x":[{},{}]},"f:b":{"x":[{},{}]},"f:c":"s","f:d":null}}]}}`,
	`{"metadata":{"managedFields":[{"fieldsV1":{"f:a":{},"f:b":{}},"fieldsV1":{"f:a":{}}}],"managedFields":[{"fieldsV1":{}}]}}`,
	`{"metadata":{"managedFields":[{"fieldsV1":{"f:a":{},"f:b":{}}},{"fieldsV1":{"f:a":{},"f:b":{}`,
	`{"metadata":{"managedFields":{"fieldsV1":{"f:a":{}}}},"spec":{"fieldsV1":{"f:a":{},"f:b":{}}}}`,
}

func TestEdgeCases(t *testing.T) {
	for _, in := range edgeCases {
		for _, opts := range allOptions {
			checkSame(t, []byte(in), opts)
		}
	}
}

// TestSyntaxMessages: syntax errors read like encoding/json's.
func TestSyntaxMessages(t *testing.T) {
	for _, in := range []string{``, `{`, `{"a":1,}`, `{"a":tru}`, `{"a":1}x`, `{"a":"\x"}`, `{"a":01}`, "{\"a\":\"\x01\"}", `{a:1}`, `[1 2]`} {
		_, want := apimachineryObject([]byte(in))
		_, got := Object([]byte(in), Options{})
		if want == nil || got == nil || got.Error() != want.Error() {
			t.Errorf("%q: error %v, apimachinery's %v", in, got, want)
		}
	}
}

func TestDepth(t *testing.T) {
	for _, depth := range []int{9999, 10000, 10001} {
		for _, open := range []string{"[", `{"a":`} {
			in := `{"x":` + strings.Repeat(open, depth-1) + "1"
			closeWith := "]"
			if open != "[" {
				closeWith = "}"
			}
			in += strings.Repeat(closeWith, depth-1) + "}"
			checkSame(t, []byte(in), Options{})
			checkSame(t, []byte(`{"metadata":{"managedFields":`+in+`}}`), Options{SkipManagedFields: true})
		}
	}
}

// TestSkipsAllocateNothing: the skipped fields are not built.
func TestSkipsAllocateNothing(t *testing.T) {
	data := decodetest.ServerObject(1)
	full := testing.AllocsPerRun(20, func() { _, _ = Object(data, Options{}) })
	skipped := testing.AllocsPerRun(20, func() { _, _ = Object(data, Options{SkipManagedFields: true, SkipLastApplied: true}) })
	if skipped >= full*0.8 {
		t.Fatalf("skipping managedFields and last-applied: %.0f allocations, %.0f without skipping", skipped, full)
	}
	t.Logf("allocations per object: %.0f, skipping managedFields and last-applied: %.0f", full, skipped)
}

func TestServerObjects(t *testing.T) {
	for i := 0; i < 50; i++ {
		for _, opts := range allOptions {
			checkSame(t, decodetest.ServerObject(i), opts)
		}
	}
}

// TestKeysInterned: two objects share their keys' bytes.
func TestKeysInterned(t *testing.T) {
	a, err := Object(decodetest.ServerObject(1), Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Object(decodetest.ServerObject(2), Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The table has a slot per hash of a key: a key whose slot another key
	// took meanwhile (a collision within one object, ~1 in 50 keys with
	// the table's random seed) is a separate copy, and keys longer than
	// maxInternLen are never interned. So this counts: nearly every key
	// short enough must be the first object's string.
	shared, total := sharedKeys(a, b)
	t.Logf("%d of %d keys shared", shared, total)
	if total < 100 || shared*3 < total*2 {
		t.Fatalf("only %d of the %d keys of the second object share the first object's strings (want at least two thirds)", shared, total)
	}
}

// sharedKeys walks b and a in step and counts b's map keys of at most
// maxInternLen bytes (total) and those that are the very string of a's key
// at the same place (shared).
func sharedKeys(a, b interface{}) (shared, total int) {
	switch b := b.(type) {
	case map[string]interface{}:
		am, _ := a.(map[string]interface{})
		for k, bv := range b {
			if len(k) <= maxInternLen {
				total++
				if ka := keyOf(am, k); sameString(ka, k) {
					shared++
				}
			}
			s, n := sharedKeys(am[k], bv)
			shared, total = shared+s, total+n
		}
	case []interface{}:
		as, _ := a.([]interface{})
		for i, bv := range b {
			var av interface{}
			if i < len(as) {
				av = as[i]
			}
			s, n := sharedKeys(av, bv)
			shared, total = shared+s, total+n
		}
	}
	return shared, total
}

func keyOf(m map[string]interface{}, want string) string {
	for k := range m {
		if k == want {
			return k
		}
	}
	return ""
}

func sameString(a, b string) bool {
	return a == b && unsafe.StringData(a) == unsafe.StringData(b)
}

// TestProjectObjects decodes the objects checked in under testdata/objects
// both ways.
func TestProjectObjects(t *testing.T) {
	for name, data := range projectObjects(t) {
		t.Run(name, func(t *testing.T) {
			for _, opts := range allOptions {
				checkSame(t, data, opts)
			}
		})
	}
}

// TestThirdPartyCorpus decodes the CRDs and example objects of the
// optional third-party corpus (INFORMERKIT_TESTDATA, see test/crds) both
// ways. Without the variable it skips.
func TestThirdPartyCorpus(t *testing.T) {
	dir := os.Getenv("INFORMERKIT_TESTDATA")
	if dir == "" {
		t.Skip("third-party corpus not configured: set INFORMERKIT_TESTDATA to the absolute path of the corpus directory (see test/crds/testdata/README.md)")
	}
	if !filepath.IsAbs(dir) {
		t.Fatalf("INFORMERKIT_TESTDATA=%q: want an absolute path", dir)
	}
	n := 0
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
		for {
			doc, err := r.Read()
			if err != nil {
				break
			}
			js, err := utilyaml.ToJSON(doc)
			if err != nil || bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
				continue
			}
			for _, opts := range allOptions {
				checkSame(t, js, opts)
			}
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("no YAML documents under %s", dir)
	}
	t.Logf("%d documents decoded both ways", n)
}

// FuzzDecode compares the decoder with apimachinery's decoding on
// arbitrary input, with every combination of options. The seed corpus
// (edge cases, server-shaped and project objects) runs in every go test.
func FuzzDecode(f *testing.F) {
	for _, in := range edgeCases {
		f.Add([]byte(in), uint8(0))
	}
	f.Add(decodetest.ServerObject(7), uint8(3))
	for _, data := range projectObjects(f) {
		f.Add(data, uint8(1))
	}
	f.Fuzz(func(t *testing.T, data []byte, o uint8) {
		checkSame(t, data, allOptions[o%4])
		v, err := Value(data)
		var want interface{}
		wantErr := kjson.UnmarshalCaseSensitivePreserveInts(data, &want)
		if refClass(wantErr) != ourClass(err) {
			t.Fatalf("Value(%q): error %v, apimachinery's %v", clip(data), err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(v, want) {
			t.Fatalf("Value(%q) = %#v, want %#v", clip(data), v, want)
		}
	})
}
