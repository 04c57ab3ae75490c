package cache

import (
	"encoding/json"
	"fmt"
)

// nestedString and nestedInt64 read a typed field of a Compact, as
// unstructured.NestedString and NestedInt64 would on the decoded object.
func nestedString(c *Compact, fields ...string) (string, bool, error) {
	v, found, err := c.NestedField(fields...)
	if !found || err != nil {
		return "", found, err
	}
	s, ok := v.(string)
	if !ok {
		return "", false, fmt.Errorf("%v accessor error: %v is of the type %T, expected string", jsonPath(fields), v, v)
	}
	return s, true, nil
}

func nestedInt64(c *Compact, fields ...string) (int64, bool, error) {
	v, found, err := c.NestedField(fields...)
	if !found || err != nil {
		return 0, found, err
	}
	i, ok := v.(int64)
	if !ok {
		return 0, false, fmt.Errorf("%v accessor error: %v is of the type %T, expected int64", jsonPath(fields), v, v)
	}
	return i, true, nil
}

// rawJSON is the JSON encoding of a Compact's object.
func rawJSON(c *Compact) ([]byte, error) {
	u, err := c.Decode()
	if err != nil {
		return nil, err
	}
	return json.Marshal(u.Object)
}
