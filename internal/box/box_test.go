package box

import (
	"reflect"
	"testing"
)

// Values made here behave as the interface values Go makes: equal,
// type-switchable, and pointing at the caller's memory.
func TestBoxes(t *testing.T) {
	strs := make([]string, 2)
	strs[0], strs[1] = "web", "db"
	a, b := String(&strs[0]), String(&strs[1])
	if a != interface{}("web") || b != interface{}("db") {
		t.Fatalf("String boxes = %v, %v", a, b)
	}
	if s, ok := a.(string); !ok || s != "web" {
		t.Fatalf("a.(string) = %q, %v", s, ok)
	}
	slices := make([][]interface{}, 1)
	slices[0] = []interface{}{a, int64(1)}
	v := Slice(&slices[0])
	if !reflect.DeepEqual(v, []interface{}{"web", int64(1)}) {
		t.Fatalf("Slice box = %#v", v)
	}
	if l, ok := v.([]interface{}); !ok || &l[0] != &slices[0][0] {
		t.Fatal("Slice box does not hold the caller's slice")
	}
}
