package query

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
)

// tokenVersion is the format of continue tokens; a token of another
// format is ErrInvalidToken.
const tokenVersion = 1

// token is a continue token as it travels: the query it belongs to, the
// walk's resourceVersion and the position of the last item returned
// (its sort values and key). It holds no reference to server state: any
// cache of the same resource can continue it.
type token struct {
	V     int    `json:"v"`
	Query string `json:"q"`
	RV    string `json:"rv,omitempty"`
	// RVs: per part, for a partitioned cache (ScanParts).
	RVs   map[string]string `json:"rvs,omitempty"`
	After []string          `json:"a,omitempty"`
	Key   string            `json:"k"`
}

// cursor is a decoded token.
type cursor struct {
	vals  []sortValue
	key   string
	rv    uint64
	hasRV bool
	rvs   map[string]uint64 // per part (ScanParts)
	at    entry             // the position: vals and key (made once, compared with every entry walked)
}

func encodeToken(p *plan, last *entry, rv uint64, hasRV bool, rvs map[string]uint64) string {
	t := token{V: tokenVersion, Query: p.hash, Key: last.key}
	if hasRV {
		t.RV = strconv.FormatUint(rv, 10)
	}
	if len(rvs) > 0 {
		t.RVs = make(map[string]string, len(rvs))
		for part, rv := range rvs {
			t.RVs[part] = strconv.FormatUint(rv, 10)
		}
	}
	for _, v := range last.vals {
		t.After = append(t.After, v.encode())
	}
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeToken(s string, p *plan) (*cursor, error) {
	bad := func(why string) (*cursor, error) {
		in := s
		if len(in) > 64 {
			in = in[:64] + "…"
		}
		return nil, newError(ErrInvalidToken, "continue", in, why)
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return bad("not base64url")
	}
	var t token
	if err := json.Unmarshal(b, &t); err != nil {
		return bad("not a token")
	}
	if t.V != tokenVersion {
		return bad("unknown token version " + strconv.Itoa(t.V))
	}
	if t.Query != p.hash {
		return nil, newError(ErrTokenMismatch, "continue", "", "the token was made for another query")
	}
	if len(t.After) != len(p.orders) || t.Key == "" {
		return bad("wrong position")
	}
	c := &cursor{key: t.Key}
	for _, a := range t.After {
		v, ok := decodeSortValue(a)
		if !ok {
			return bad("wrong position")
		}
		c.vals = append(c.vals, v)
	}
	if t.RV != "" {
		rv, err := strconv.ParseUint(t.RV, 10, 64)
		if err != nil {
			return bad("wrong resourceVersion")
		}
		c.rv, c.hasRV = rv, true
	}
	for part, s := range t.RVs {
		rv, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return bad("wrong resourceVersion")
		}
		if c.rvs == nil {
			c.rvs = map[string]uint64{}
		}
		c.rvs[part] = rv
	}
	c.at = entry{vals: c.vals, key: c.key}
	return c, nil
}
