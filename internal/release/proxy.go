package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// buildProxy writes a file-based module proxy (GOPROXY=file://out) holding
// every module at version v, built from the working tree's files that git
// tracks or would track (ignored files, such as built binaries, are left
// out): each module's zip, go.mod and info, as `go mod download` receives
// them from a proxy serving the tags of that version.
func (r *release) buildProxy(out, v string, mods []modEntry) error {
	stage, err := os.MkdirTemp("", "redlimit-stage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	if err := r.stage(stage); err != nil {
		return err
	}
	for _, m := range mods {
		if err := writeModule(out, stage, m, v); err != nil {
			return fmt.Errorf("module %s: %w", m.Path, err)
		}
	}
	return nil
}

// stage copies the working tree's files, as git sees them, into dir.
func (r *release) stage(dir string) error {
	list, err := output(r.repo, nil, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return err
	}
	for _, name := range strings.Split(string(list), "\x00") {
		if name == "" {
			continue
		}
		src := r.path(filepath.FromSlash(name))
		fi, err := os.Lstat(src)
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		dst := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := os.WriteFile(dst, data, fi.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

func writeModule(out, stage string, m modEntry, v string) error {
	escaped, err := module.EscapePath(m.Path)
	if err != nil {
		return err
	}
	dir := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	src := filepath.Join(stage, filepath.FromSlash(m.Dir))
	var zbuf bytes.Buffer
	if err := modzip.CreateFromDir(&zbuf, module.Version{Path: m.Path, Version: v}, src); err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		return err
	}
	info, _ := json.Marshal(struct {
		Version string
		Time    time.Time
	}{v, time.Now().UTC().Truncate(time.Second)})
	files := map[string][]byte{
		v + ".zip":  zbuf.Bytes(),
		v + ".mod":  gomod,
		v + ".info": info,
		"list":      []byte(v + "\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// zipFiles lists the files in module m's zip at version v in proxy dir out,
// without the module@version/ prefix.
func zipFiles(out string, m modEntry, v string) (map[string][]byte, error) {
	escaped, err := module.EscapePath(m.Path)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(escaped), "@v", v+".zip"))
	if err != nil {
		return nil, err
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	prefix := m.Path + "@" + v + "/"
	files := map[string][]byte{}
	for _, f := range zr.File {
		name, ok := strings.CutPrefix(f.Name, prefix)
		if !ok {
			return nil, fmt.Errorf("%s: file %s outside %s", m.Path, f.Name, prefix)
		}
		if name != "LICENSE" && name != "go.mod" {
			files[name] = nil
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, err
		}
		files[name] = b
	}
	return files, nil
}

// checkZips verifies what every module zip must hold: the licence (the root's
// LICENSE, byte for byte) and a go.mod with no replace directive.
func (r *release) checkZips(out, v string, mods []modEntry) error {
	licence, err := os.ReadFile(r.path("LICENSE"))
	if err != nil {
		return fmt.Errorf("the root LICENSE: %w", err)
	}
	var problems []string
	for _, m := range mods {
		files, err := zipFiles(out, m, v)
		if err != nil {
			return err
		}
		if got, ok := files["LICENSE"]; !ok {
			problems = append(problems, fmt.Sprintf("%s@%s: no LICENSE in the module zip (copy the root's into %s/)", m.Path, v, m.Dir))
		} else if !bytes.Equal(got, licence) {
			problems = append(problems, fmt.Sprintf("%s@%s: LICENSE differs from the root's", m.Path, v))
		}
		gm, err := modfile.Parse("go.mod", files["go.mod"], nil)
		if err != nil {
			return fmt.Errorf("%s@%s: %w", m.Path, v, err)
		}
		if len(gm.Replace) > 0 {
			problems = append(problems, fmt.Sprintf("%s@%s: go.mod has a replace directive", m.Path, v))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("module zips:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}
