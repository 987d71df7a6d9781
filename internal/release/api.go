package main

import (
	"bufio"
	"fmt"
	"go/types"
	"os"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"
)

// The API of a release is a list of features, one a line, in the spirit of
// the Go project's api/go1.*.txt: "pkg <path>, <kind> <name>" as the key and
// the feature's type as the value, joined by " | ". The file api/<version>.txt
// records a release's; the diff of two lists tells incompatible changes
// (a feature removed or changed, a method added to an interface a user may
// implement) from compatible ones (a feature added).

// apiFeatures lists the exported API of every importable package of the
// modules mods: every package but commands, internal packages, examples and
// the benchmark harness.
func (r *release) apiFeatures(mods []modEntry) (map[string]string, error) {
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedTypes | packages.NeedModule,
		Dir:  r.repo,
		Env:  append(os.Environ(), "GOWORK="+r.path("go.work"), "GOFLAGS=-mod=readonly"),
	}
	var patterns []string
	for _, m := range mods {
		patterns = append(patterns, m.Path+"/...")
	}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, err
	}
	released := map[string]bool{}
	for _, m := range mods {
		released[m.Path] = true
	}
	features := map[string]string{}
	var errs []string
	for _, p := range pkgs {
		for _, e := range p.Errors {
			errs = append(errs, e.Error())
		}
		if !importable(p) || p.Module == nil || !released[p.Module.Path] {
			continue
		}
		for k, v := range packageFeatures(p.Types) {
			features[k] = v
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("loading packages:\n  %s", strings.Join(errs, "\n  "))
	}
	return features, nil
}

// importable reports whether a user can import p: not a command, not under
// internal/, not the example service or the benchmark harness.
func importable(p *packages.Package) bool {
	if p.Name == "main" || p.Types == nil {
		return false
	}
	for _, elem := range strings.Split(p.PkgPath, "/") {
		switch elem {
		case "internal", "testdata", "example", "bench", "cmd":
			return false
		}
	}
	return true
}

func packageFeatures(pkg *types.Package) map[string]string {
	qual := func(p *types.Package) string {
		if p == pkg {
			return ""
		}
		return p.Path()
	}
	ts := func(t types.Type) string { return types.TypeString(t, qual) }
	features := map[string]string{}
	add := func(key, value string) { features["pkg "+pkg.Path()+", "+key] = value }
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch o := obj.(type) {
		case *types.Const:
			add("const "+name, ts(o.Type())+" = "+o.Val().ExactString())
		case *types.Var:
			add("var "+name, ts(o.Type()))
		case *types.Func:
			add("func "+name, signature(o.Type().(*types.Signature), ts))
		case *types.TypeName:
			if o.IsAlias() {
				add("type "+name, "= "+ts(o.Type()))
				continue
			}
			named, ok := o.Type().(*types.Named)
			if !ok {
				continue
			}
			tparams := typeParams(named.TypeParams(), ts)
			switch u := named.Underlying().(type) {
			case *types.Struct:
				add("type "+name, tparams+"struct")
				for f := range u.Fields() {
					if f.Exported() {
						k := "field"
						if f.Embedded() {
							k = "embedded"
						}
						add("type "+name+" struct, "+k+" "+f.Name(), ts(f.Type()))
					}
				}
			case *types.Interface:
				kind := "interface"
				for m := range u.Methods() {
					if !m.Exported() {
						kind = "interface (sealed)" // no user type implements it
					}
				}
				add("type "+name, tparams+kind)
				for m := range u.Methods() {
					if m.Exported() {
						add("type "+name+" interface, method "+m.Name(), signature(m.Type().(*types.Signature), ts))
					}
				}
			default:
				add("type "+name, tparams+ts(u))
			}
			for m := range named.Methods() {
				if !m.Exported() {
					continue
				}
				sig := m.Type().(*types.Signature)
				recv := name
				if _, ptr := sig.Recv().Type().(*types.Pointer); ptr {
					recv = "*" + name
				}
				add("method ("+recv+") "+m.Name(), signature(sig, ts))
			}
		}
	}
	return features
}

// signature writes a func type without parameter names, which callers do
// not depend on.
func signature(sig *types.Signature, ts func(types.Type) string) string {
	var b strings.Builder
	b.WriteString("func")
	b.WriteString(typeParams(sig.TypeParams(), ts))
	b.WriteString("(")
	for i := range sig.Params().Len() {
		if i > 0 {
			b.WriteString(", ")
		}
		t := sig.Params().At(i).Type()
		if sig.Variadic() && i == sig.Params().Len()-1 {
			b.WriteString("..." + ts(t.(*types.Slice).Elem()))
		} else {
			b.WriteString(ts(t))
		}
	}
	b.WriteString(")")
	switch n := sig.Results().Len(); n {
	case 0:
	case 1:
		b.WriteString(" " + ts(sig.Results().At(0).Type()))
	default:
		b.WriteString(" (")
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(ts(sig.Results().At(i).Type()))
		}
		b.WriteString(")")
	}
	return b.String()
}

func typeParams(tps *types.TypeParamList, ts func(types.Type) string) string {
	if tps.Len() == 0 {
		return ""
	}
	var parts []string
	for tp := range tps.TypeParams() {
		parts = append(parts, tp.Obj().Name()+" "+ts(tp.Constraint()))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// formatAPI writes features as the lines of an api/<version>.txt file.
func formatAPI(features map[string]string) []byte {
	keys := make([]string, 0, len(features))
	for k := range features {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + " | " + features[k] + "\n")
	}
	return []byte(b.String())
}

func parseAPI(file string) (map[string]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	features := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, " | ")
		if !ok {
			return nil, fmt.Errorf("%s:%d: no ' | ' between the feature and its type", file, n)
		}
		features[k] = v
	}
	return features, sc.Err()
}

// apiChange is one difference between two API lists.
type apiChange struct {
	Key          string
	Old, New     string // "" when absent
	Incompatible bool
}

func (c apiChange) String() string {
	switch {
	case c.Old == "":
		return "added   " + c.Key + " | " + c.New
	case c.New == "":
		return "removed " + c.Key + " | " + c.Old
	default:
		return "changed " + c.Key + " | " + c.Old + " → " + c.New
	}
}

// diffAPI compares the API of a release (old) with this one (new). Removing or
// changing a feature is incompatible; adding one is compatible, except a
// method added to an existing interface that users can implement (their
// types would no longer satisfy it).
func diffAPI(old, new map[string]string) []apiChange {
	var changes []apiChange
	for k, ov := range old {
		nv, ok := new[k]
		switch {
		case !ok:
			changes = append(changes, apiChange{Key: k, Old: ov, Incompatible: true})
		case nv != ov:
			changes = append(changes, apiChange{Key: k, Old: ov, New: nv, Incompatible: true})
		}
	}
	for k, nv := range new {
		if _, ok := old[k]; ok {
			continue
		}
		c := apiChange{Key: k, New: nv}
		if iface, _, ok := strings.Cut(k, " interface, method "); ok {
			// "pkg P, type T interface, method M": incompatible if T existed
			// as an interface a user could implement.
			if kind, existed := old[iface]; existed && strings.HasSuffix(kind, "interface") {
				c.Incompatible = true
			}
		}
		changes = append(changes, c)
	}
	sort.Slice(changes, func(i, j int) bool {
		if changes[i].Incompatible != changes[j].Incompatible {
			return changes[i].Incompatible
		}
		return changes[i].Key < changes[j].Key
	})
	return changes
}

// previousRelease returns the newest version recorded under api/ that is
// older than v, or "" when there is none.
func (r *release) previousRelease(v string) (string, error) {
	entries, err := os.ReadDir(r.path("api"))
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	prev := ""
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".txt")
		if !ok || checkVersion(name) != nil {
			continue
		}
		if compareSemver(name, v) < 0 && (prev == "" || compareSemver(name, prev) > 0) {
			prev = name
		}
	}
	return prev, nil
}

// apiDiff returns the changes since the release before v, and that release
// ("v0.0.0", with no features, when v is the first).
func (r *release) apiDiff(v string, mods []modEntry) (string, []apiChange, error) {
	cur, err := r.apiFeatures(mods)
	if err != nil {
		return "", nil, err
	}
	prev, err := r.previousRelease(v)
	if err != nil {
		return "", nil, err
	}
	old := map[string]string{}
	if prev == "" {
		prev = "v0.0.0"
	} else if old, err = parseAPI(r.path("api", prev+".txt")); err != nil {
		return "", nil, err
	}
	return prev, diffAPI(old, cur), nil
}

// allowsIncompatible reports whether going from prev to v may break the API:
// a major version, or a minor one before v1.0.0.
func allowsIncompatible(prev, v string) bool {
	p1, p2, _, _ := parseSemver(prev)
	v1, v2, _, _ := parseSemver(v)
	if p1 == 0 && v1 == 0 {
		return v2 > p2 || prev == "v0.0.0"
	}
	return v1 > p1
}

// printAPI prints this tree's API listing, or its diff against release v.
func (r *release) printAPI(v string, diff bool) error {
	mods, err := r.modules()
	if err != nil {
		return err
	}
	if !diff {
		features, err := r.apiFeatures(mods)
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(formatAPI(features))
		return err
	}
	prev, changes, err := r.apiDiff(v, mods)
	if err != nil {
		return err
	}
	fmt.Printf("API since %s:\n", prev)
	for _, c := range changes {
		fmt.Println(" ", c)
	}
	return nil
}

// apiFile is where release v's API is recorded.
func (r *release) apiFile(v string) string { return r.path("api", v+".txt") }
