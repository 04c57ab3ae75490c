// Command shapereport prints the size measures of the library's shape
// that issue 50 ("every mechanism in its own room") tracks, so that a
// before and an after can be compared with one command:
//
//	go run ./internal/cmd/shapereport            # this checkout
//	go run ./internal/cmd/shapereport DIR        # another checkout's root (git worktree add)
//
// What it counts, in the root module's non-test .go files (nested modules
// — test/, examples/, controllerruntime/, prometheusmetrics/ — and
// testdata are skipped):
//
//   - files over 600 lines;
//   - functions and methods whose declaration spans over 80 lines;
//   - the fields and methods of dynamicinformer's `entry` type;
//   - the lines of the files at dynamicinformer's top level that declare
//     methods of `entry` (the machinery the issue wants under internal/);
//   - init-time hooks: `func init()` bodies that set or call a name of
//     another package;
//   - dynamicinformer's exported names, methods of exported types
//     included (as internal/cmd/apisurface counts them).
//
// Duplicate runs are counted with the duplicates tool, not here.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	verbose := flag.Bool("v", false, "list the long files and functions")
	flag.Parse()
	root := "."
	if flag.NArg() > 0 {
		root = flag.Arg(0)
	}
	r, err := measure(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "shapereport:", err)
		os.Exit(1)
	}
	fmt.Printf("| measure | %s |\n|---|---|\n", root)
	fmt.Printf("| library files over 600 lines | %d |\n", len(r.longFiles))
	fmt.Printf("| functions over 80 lines | %d |\n", len(r.longFuncs))
	fmt.Printf("| `entry` fields / methods | %d / %d |\n", r.entryFields, r.entryMethods)
	fmt.Printf("| lines of dynamicinformer's top-level files declaring `entry` methods | %d |\n", r.entryLines)
	fmt.Printf("| init-time hooks | %d |\n", len(r.hooks))
	fmt.Printf("| dynamicinformer exported names (methods of exported types included) | %d |\n", r.exported)
	if *verbose {
		for _, l := range [][]string{r.longFiles, r.longFuncs, r.hooks} {
			for _, s := range l {
				fmt.Println("  ", s)
			}
		}
	}
}

type report struct {
	longFiles, longFuncs, hooks []string
	entryFields, entryMethods   int
	entryLines, exported        int
}

func measure(root string) (*report, error) {
	r := &report{}
	fset := token.NewFileSet()
	di := filepath.Join(root, "dynamicinformer")
	entryFiles := map[string]int{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root {
				if d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // a nested module
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		lines := fset.File(f.Pos()).LineCount()
		if lines > 600 {
			r.longFiles = append(r.longFiles, fmt.Sprintf("%s: %d lines", rel, lines))
		}
		inDI := filepath.Dir(path) == di
		imports := map[string]bool{}
		for _, im := range f.Imports {
			name := filepath.Base(strings.Trim(im.Path.Value, `"`))
			if im.Name != nil {
				name = im.Name.Name
			}
			imports[name] = true
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				n := fset.Position(d.End()).Line - fset.Position(d.Pos()).Line + 1
				if n > 80 {
					r.longFuncs = append(r.longFuncs, fmt.Sprintf("%s: %s: %d lines", rel, d.Name.Name, n))
				}
				if d.Recv == nil && d.Name.Name == "init" && d.Body != nil && assignsElsewhere(d.Body, imports) {
					r.hooks = append(r.hooks, rel+": func init")
				}
				if inDI && d.Recv != nil && recvName(d.Recv) == "entry" {
					r.entryMethods++
					entryFiles[path] = lines
				}
				if inDI && d.Name.IsExported() && (d.Recv == nil || ast.IsExported(recvName(d.Recv))) {
					r.exported++
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if inDI && s.Name.Name == "entry" {
							if st, ok := s.Type.(*ast.StructType); ok {
								for _, fl := range st.Fields.List {
									r.entryFields += max(len(fl.Names), 1)
								}
							}
						}
						if inDI && s.Name.IsExported() {
							r.exported++
							if it, ok := s.Type.(*ast.InterfaceType); ok {
								for _, m := range it.Methods.List {
									for _, n := range m.Names {
										if n.IsExported() {
											r.exported++
										}
									}
								}
							}
						}
					case *ast.ValueSpec:
						if inDI {
							for _, n := range s.Names {
								if n.IsExported() {
									r.exported++
								}
							}
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, n := range entryFiles {
		r.entryLines += n
	}
	sort.Strings(r.longFiles)
	sort.Strings(r.longFuncs)
	return r, nil
}

func recvName(fl *ast.FieldList) string {
	if fl == nil || len(fl.List) == 0 {
		return ""
	}
	t := fl.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// assignsElsewhere reports whether body assigns to, or calls, a name of
// an imported package (a hook set, or registered, at init).
func assignsElsewhere(body *ast.BlockStmt, imports map[string]bool) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && imports[id.Name] {
				found = true
			}
		}
		return !found
	})
	return found
}
