package query

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	q, err := Parse("namespace=prod,dev&labelSelector=app%3Dweb&where=spec.replicas>2&where=status.phase+in+(Running,'Pending')" +
		"&where=metadata.deletionTimestamp+exists&where=metadata.labels['app.kubernetes.io/name']+prefix+web" +
		"&orderBy=-metadata.creationTimestamp,metadata.name&limit=50&count=true")
	if err != nil {
		t.Fatal(err)
	}
	want := New().InNamespaces("prod", "dev").WithLabels("app=web").
		Where("spec.replicas", Gt, Int(2)).
		Where("status.phase", In, String("Running"), String("Pending")).
		Where("metadata.deletionTimestamp", Exists).
		Where("metadata.labels['app.kubernetes.io/name']", Prefix, String("web")).
		SortBy(Desc("metadata.creationTimestamp"), Asc("metadata.name")).WithLimit(50).WithCount()
	if q.String() != want.String() {
		t.Fatalf("parsed\n %s\nbuilt\n %s", q, want)
	}
	p1, _ := compile(q)
	p2, _ := compile(want)
	if p1.hash != p2.hash {
		t.Fatal("the parsed and the built query differ")
	}
}

func TestLiteralTypes(t *testing.T) {
	for _, tc := range []struct {
		lit  string
		kind valueKind
	}{
		{"3", kindNumber}, {"-2.5e3", kindNumber}, {"true", kindBool}, {"'true'", kindString},
		{"2026-01-02T03:04:05Z", kindTime}, {"web", kindString}, {"0x10", kindString}, {"Inf", kindString},
	} {
		if v := parseLiteral(tc.lit); v.kind != tc.kind {
			t.Errorf("%s: kind %d, want %d", tc.lit, v.kind, tc.kind)
		}
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if c, ok := compareLiteral("2026-01-02T04:00:00+01:00", Time(at)); !ok || c >= 0 {
		t.Errorf("timestamps compare as instants: %d %v", c, ok)
	}
	if c, ok := compareLiteral(int64(3), parseLiteral("3")); !ok || c != 0 {
		t.Error("3 = 3")
	}
	if c, ok := compareLiteral("3", parseLiteral("3")); !ok || c != 0 {
		t.Error(`"3" = 3 as text`)
	}
	if _, ok := compareLiteral(map[string]interface{}{}, String("x")); ok {
		t.Error("an object compares with nothing")
	}
}

func TestErrors(t *testing.T) {
	other, _ := New().SortBy(Asc("metadata.name")).WithLimit(1).validToken(t)
	for _, tc := range []struct {
		in   string
		want error
	}{
		{"where=spec.x~3", ErrUnknownOperator},
		{"where=spec.x+like+3", ErrUnknownOperator},
		{"where=spec.x", ErrUnknownOperator},
		{"where=spec..x=3", ErrInvalidPath},
		{"where=spec.x[=3", ErrInvalidPath},
		{"orderBy=spec.[x]", ErrInvalidPath},
		{"where=spec.x+in+3", ErrInvalidValue},
		{"where=spec.x+exists+3", ErrInvalidValue},
		{"limit=-1", ErrInvalidValue},
		{"limit=x", ErrInvalidValue},
		{"labelSelector=a%3D%3D%3Db", ErrInvalidValue},
		{"bogus=1", ErrInvalidValue},
		{"continue=!!!", ErrInvalidToken},
		{"continue=e30", ErrInvalidToken},
		{"continue=" + other, ErrTokenMismatch},
	} {
		_, err := Parse(tc.in)
		if !errors.Is(err, tc.want) || !errors.Is(err, ErrInvalidQuery) {
			t.Errorf("%s: %v, want %v", tc.in, err, tc.want)
			continue
		}
		var qe *Error
		if !errors.As(err, &qe) || qe.Param == "" {
			t.Errorf("%s: %v is not an *Error naming its parameter", tc.in, err)
		}
	}
	if err := New().Where("x", Operator("~"), Int(1)).Validate(); !errors.Is(err, ErrUnknownOperator) {
		t.Errorf("builder: %v", err)
	}
	if err := New().Where("x", Eq).Validate(); !errors.Is(err, ErrInvalidValue) {
		t.Errorf("no value: %v", err)
	}
}

// validToken returns a continue token of q over a small cache.
func (q Query) validToken(t *testing.T) (string, error) {
	w := newWorld()
	for _, n := range []string{"a", "b", "c"} {
		w.put(&mobj{ns: "a", name: n, created: modelEpoch})
	}
	p, err := Scan(FromIndexer(w.store), q)
	if err != nil || p.Continue == "" {
		t.Fatalf("no token: %v", err)
	}
	return p.Continue, nil
}

// FuzzParse: Parse never panics; what it accepts, its String reads back
// to the same query.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"where=spec.replicas>2", "where=status.phase+in+(Running,Pending)&orderBy=-metadata.name",
		"where=spec.tags[*]+contains+'a,b'", "where=metadata.labels['x.y/z']!=\"q\"",
		"namespace=a,b&labelSelector=app+in+(x)&limit=3&count=true", "where=spec.x<=2026-01-01T00:00:00Z",
		"where=a.b+notin+('',\"'\")", "orderBy=a[0].b,+c", "where=x+exists", "where=x+prefix+",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := Parse(s)
		if err != nil {
			var qe *Error
			if !errors.As(err, &qe) || !errors.Is(err, ErrInvalidQuery) {
				t.Fatalf("%q: untyped error %v", s, err)
			}
			return
		}
		q2, err := Parse(q.String())
		if err != nil && strings.Contains(s, "'") && strings.Contains(s, `"`) {
			return // a name holding both quotes and a character to quote has no spelling
		}
		if err != nil {
			t.Fatalf("%q: its string form %q does not parse: %v", s, q.String(), err)
		}
		p1, _ := compile(q)
		p2, _ := compile(q2)
		if p1.hash != p2.hash {
			t.Fatalf("%q: reads back as another query:\n %s\n %s", s, q, q2)
		}
	})
}

// FuzzContinue: any token is either a typed error or a valid position;
// never a panic, never a page that breaks the order.
func FuzzContinue(f *testing.F) {
	q := New().SortBy(Asc("spec.replicas"), Desc("status.phase")).WithLimit(2)
	tok, _ := q.validToken(&testing.T{})
	for _, s := range []string{tok, "", "e30", "eyJ2IjoxfQ", "!!", tok[:len(tok)/2]} {
		f.Add(s)
	}
	w := newWorld()
	for i, n := range []string{"a", "b", "c", "d", "e"} {
		r := int64(i % 2)
		ph := modelPhases[i%3]
		w.put(&mobj{ns: "x", name: n, replicas: &r, phase: &ph, created: modelEpoch})
	}
	idx := w.index(&testing.T{}, q)
	f.Fuzz(func(t *testing.T, s string) {
		qq := q.After(s)
		p1, err1 := Scan(FromIndexer(w.store), qq)
		p2, err2 := idx.Query(qq)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("scan %v, index %v", err1, err2)
		}
		if err1 != nil {
			if !errors.Is(err1, ErrInvalidQuery) {
				t.Fatalf("untyped error %v", err1)
			}
			return
		}
		k1, k2 := itemKeys(t, p1.Items), itemKeys(t, p2.Items)
		if len(k1) != len(k2) {
			t.Fatalf("scan %v, index %v", k1, k2)
		}
		for i := range k1 {
			if k1[i] != k2[i] {
				t.Fatalf("scan %v, index %v", k1, k2)
			}
		}
	})
}
