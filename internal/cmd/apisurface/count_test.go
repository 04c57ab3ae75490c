package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func write(t *testing.T, dir, name, src string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

const synthetic = `package p

const A, b = 1, 2
const (
	C = iota
	d
)
var V, w int
var _ = 3

type T struct{ Field int }      // fields are not counted
type u struct{}
type G[K comparable, V any] struct{}
type I interface {
	M()
	m()
	Embedded
}
type Embedded interface{ E() }

func F() {}
func f() {}
func (T) M()              {}
func (*T) N()             {}
func (T) n()              {}
func (u) Hidden()         {}
func (g *G[K, V]) Get()   {}
func (g G[K, V]) Put()    {}
func init()               {}
`

func TestExported(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "p.go", synthetic)
	write(t, dir, "p_test.go", "package p\n\nfunc TestOnly() {}\nvar Exp = 1\n")
	write(t, dir, "other_linux_only.go", "//go:build ignore\n\npackage p\n\nfunc Ignored() {}\n")
	p, ok, err := CountDir(dir)
	if err != nil || !ok {
		t.Fatalf("CountDir: ok=%v err=%v", ok, err)
	}
	want := []string{
		"A", "C", "Embedded", "Embedded.E", "F", "G", "G.Get", "G.Put",
		"I", "I.M", "T", "T.M", "T.N", "V",
	}
	if !reflect.DeepEqual(p.Names, want) {
		t.Errorf("names:\n got %q\nwant %q", p.Names, want)
	}
}

func TestCountDirSkipsMain(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "main.go", "package main\n\nfunc Exported() {}\nfunc main() {}\n")
	if _, ok, err := CountDir(dir); err != nil || ok {
		t.Fatalf("main package counted: ok=%v err=%v", ok, err)
	}
}

func TestCountModule(t *testing.T) {
	root := t.TempDir()
	write(t, root, "go.mod", "module example.com/m\n")
	write(t, root, "a.go", "package m\n\nfunc One() {}\n")
	write(t, filepath.Join(root, "sub"), "s.go", "package sub\n\ntype X int\nfunc (X) Y() {}\n")
	write(t, filepath.Join(root, "sub", "internal", "in"), "i.go", "package in\n\nfunc Hidden() {}\n")
	write(t, filepath.Join(root, "nested"), "go.mod", "module example.com/nested\n")
	write(t, filepath.Join(root, "nested"), "n.go", "package nested\n\nfunc Other() {}\n")
	write(t, filepath.Join(root, "cmd", "tool"), "main.go", "package main\n\nfunc Exported() {}\n")
	write(t, filepath.Join(root, "testdata"), "t.go", "package testdata\n\nfunc Data() {}\n")

	pkgs, err := CountModule(root)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, p := range pkgs {
		got[p.Path] = p.Names
	}
	want := map[string][]string{".": {"One"}, "sub": {"X", "X.Y"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}

	var out bytes.Buffer
	if err := run(&out, []string{filepath.Join(root, "sub")}, true); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "X.Y") || !strings.Contains(s, "total") || !strings.HasSuffix(strings.TrimSpace(s), "2") {
		t.Errorf("output:\n%s", s)
	}
}
