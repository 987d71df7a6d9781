// Command apicount counts the exported API of the main module, as the v1
// budget counts it: over the non-test Go files of the module's importable
// packages (not internal/, cmd/, bench/, example/, testdata/, nor nested
// modules), the exported identifiers (funcs, types, methods of exported
// types, consts, vars) and the exported struct fields and interface
// methods. It prints one line per package and the totals, and exits 1 when
// a total is over its budget (-ids, -fields; 0 turns a budget off).
//
//	go run ./internal/apicount [-ids 140] [-fields 100] [dir]
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
	maxIDs := flag.Int("ids", 140, "budget of exported identifiers (0: none)")
	maxFields := flag.Int("fields", 100, "budget of exported struct fields and interface methods (0: none)")
	verbose := flag.Bool("v", false, "list every counted name")
	flag.Parse()
	root := "."
	if flag.NArg() > 0 {
		root = flag.Arg(0)
	}
	counts, err := count(root, *verbose)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apicount:", err)
		os.Exit(2)
	}
	var ids, fields int
	pkgs := make([]string, 0, len(counts))
	for p := range counts {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		c := counts[p]
		fmt.Printf("  %-28s %4d identifiers %4d fields and interface methods\n", p, c.ids, c.fields)
		ids += c.ids
		fields += c.fields
	}
	fmt.Printf("apicount: %d exported identifiers (budget %d), %d exported struct fields and interface methods (budget %d)\n", ids, *maxIDs, fields, *maxFields)
	if (*maxIDs > 0 && ids > *maxIDs) || (*maxFields > 0 && fields > *maxFields) {
		os.Exit(1)
	}
}

type tally struct{ ids, fields int }

// count walks the module rooted at root.
func count(root string, verbose bool) (map[string]*tally, error) {
	counts := map[string]*tally{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			base := d.Name()
			if strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") || base == "testdata" ||
				base == "internal" || (strings.Count(rel, "/") == 0 && (base == "cmd" || base == "bench" || base == "example")) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a nested module
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if f.Name.Name == "main" {
			return nil
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		if pkg == "." {
			pkg = "(root)"
		}
		t := counts[pkg]
		if t == nil {
			t = &tally{}
			counts[pkg] = t
		}
		note := func(kind, name string) {
			if verbose {
				fmt.Printf("%s\t%s\t%s\n", pkg, kind, name)
			}
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					t.ids++
					note("func", d.Name.Name)
					continue
				}
				if recv := recvName(d.Recv.List[0].Type); ast.IsExported(recv) {
					t.ids++
					note("method", recv+"."+d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								t.ids++
								note(d.Tok.String(), n.Name)
							}
						}
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						t.ids++
						note("type", s.Name.Name)
						t.fields += members(s.Type, s.Name.Name, note)
					}
				}
			}
		}
		return nil
	})
	return counts, err
}

// members counts the exported fields of a struct type and the methods of an
// interface type (an embedded field counts when its type name is exported;
// an embedded interface adds no method of its own).
func members(expr ast.Expr, owner string, note func(kind, name string)) int {
	n := 0
	switch t := expr.(type) {
	case *ast.StructType:
		for _, f := range t.Fields.List {
			if len(f.Names) == 0 {
				if name := recvName(f.Type); ast.IsExported(name) {
					n++
					note("field", owner+"."+name)
				}
				continue
			}
			for _, name := range f.Names {
				if name.IsExported() {
					n++
					note("field", owner+"."+name.Name)
				}
			}
		}
	case *ast.InterfaceType:
		for _, m := range t.Methods.List {
			for _, name := range m.Names {
				if name.IsExported() {
					n++
					note("interface method", owner+"."+name.Name)
				}
			}
		}
	}
	return n
}

// recvName returns the type name of a receiver or embedded field: T, *T,
// T[P], pkg.T.
func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.IndexListExpr:
		return recvName(t.X)
	case *ast.SelectorExpr:
		return t.Sel.Name
	case *ast.Ident:
		return t.Name
	}
	return ""
}
