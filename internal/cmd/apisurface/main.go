// Command apisurface counts the public face of informerkit: per package, the
// exported top-level names (funcs, types, vars, consts) plus the exported
// methods of exported types (declared methods and those listed in an
// interface type). Struct fields are not counted. Test files, files excluded
// by build constraints, internal packages, testdata and main packages are not
// counted.
//
// Run from the repository root:
//
//	go run ./internal/cmd/apisurface            # the library (root module)
//	go run ./internal/cmd/apisurface -v         # also list every name
//	go run ./internal/cmd/apisurface DIR...     # any package directories, e.g. an anchor
//
// With no arguments it walks the module containing the working directory,
// skipping nested modules (test/, examples/, prometheusmetrics/), and prints
// one line per package and the library total. The prometheusmetrics module
// is counted with `go run ./internal/cmd/apisurface prometheusmetrics`.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	verbose := flag.Bool("v", false, "list every counted name")
	flag.Parse()
	if err := run(os.Stdout, flag.Args(), *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "apisurface:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, dirs []string, verbose bool) error {
	var pkgs []Package
	if len(dirs) == 0 {
		root, err := moduleRoot()
		if err != nil {
			return err
		}
		pkgs, err = CountModule(root)
		if err != nil {
			return err
		}
	} else {
		for _, d := range dirs {
			p, ok, err := CountDir(d)
			if err != nil {
				return err
			}
			if ok {
				p.Path = d
				pkgs = append(pkgs, p)
			}
		}
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].Path < pkgs[j].Path })
	total := 0
	for _, p := range pkgs {
		fmt.Fprintf(w, "%-40s %4d\n", p.Path, len(p.Names))
		if verbose {
			for _, n := range p.Names {
				fmt.Fprintf(w, "    %s\n", n)
			}
		}
		total += len(p.Names)
	}
	fmt.Fprintf(w, "%-40s %4d\n", "total", total)
	return nil
}

// moduleRoot is the nearest directory at or above the working directory that
// holds a go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod at or above the working directory")
		}
		dir = parent
	}
}

// CountModule counts every non-internal, non-main package of the module
// rooted at root, skipping nested modules, testdata and hidden directories.
// Package paths are relative to root.
func CountModule(root string) ([]Package, error) {
	var pkgs []Package
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root {
			if name == "internal" || name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		p, ok, err := CountDir(path)
		if err != nil {
			return err
		}
		if ok {
			rel, _ := filepath.Rel(root, path)
			p.Path = filepath.ToSlash(rel)
			pkgs = append(pkgs, p)
		}
		return nil
	})
	return pkgs, err
}
