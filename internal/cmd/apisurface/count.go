package main

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Package is one counted package: its path and its public names, sorted.
// A method is listed as Type.Method.
type Package struct {
	Path  string
	Name  string
	Names []string
}

// CountDir counts the public face of the Go package in dir. ok is false when
// dir holds no non-test Go files for the default build context, or holds a
// main package.
func CountDir(dir string) (p Package, ok bool, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return Package{}, false, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		if match, err := build.Default.MatchFile(dir, n); err != nil || !match {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return Package{}, false, err
		}
		files = append(files, f)
	}
	if len(files) == 0 || files[0].Name.Name == "main" {
		return Package{}, false, nil
	}
	return Package{Name: files[0].Name.Name, Names: Exported(files)}, true, nil
}

// Exported returns the public names of one package's files, sorted: exported
// top-level funcs, types, vars and consts, plus the exported methods (declared
// with a receiver, or listed in an interface type) of exported types, as
// Type.Method. Methods an interface gets by embedding another are not counted
// again.
func Exported(files []*ast.File) []string {
	seen := map[string]bool{}
	for _, f := range files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil || len(d.Recv.List) == 0 {
					seen[d.Name.Name] = true
					continue
				}
				if recv := receiverType(d.Recv.List[0].Type); recv != "" && ast.IsExported(recv) {
					seen[recv+"."+d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						seen[s.Name.Name] = true
						if it, ok := s.Type.(*ast.InterfaceType); ok {
							for _, m := range it.Methods.List {
								for _, n := range m.Names {
									if n.IsExported() {
										seen[s.Name.Name+"."+n.Name] = true
									}
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								seen[n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// receiverType is the base type name of a method receiver: T, *T, T[K], *T[K, V].
func receiverType(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.ParenExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}
