package main

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// consumers holds one small program per module, run by a fresh consumer
// module that installs only that module: testdata/consumer/<name>/main.go,
// where name is the module's short name (module.Name).
//
//go:embed testdata/consumer
var consumers embed.FS

// consumerEnv is the environment of a consumer: no workspace, no replace, a
// module cache of its own (so nothing a previous run cached is reused: a
// module version is immutable in a cache), and the file proxy first. The
// machine's module cache serves the third-party modules it already holds
// (its download directory is itself a file proxy), the configured proxies
// the rest.
func consumerEnv(proxy, modcache string) ([]string, error) {
	goproxy, err := output(".", nil, "go", "env", "GOPROXY")
	if err != nil {
		return nil, err
	}
	cache, err := output(".", nil, "go", "env", "GOMODCACHE")
	if err != nil {
		return nil, err
	}
	nosumdb, err := output(".", nil, "go", "env", "GONOSUMDB")
	if err != nil {
		return nil, err
	}
	proxies := []string{"file://" + filepath.ToSlash(proxy)}
	if c := strings.TrimSpace(string(cache)); c != "" {
		if _, err := os.Stat(filepath.Join(c, "cache", "download")); err == nil {
			proxies = append(proxies, "file://"+filepath.ToSlash(filepath.Join(c, "cache", "download")))
		}
	}
	if p := strings.TrimSpace(string(goproxy)); p != "" && p != "off" {
		proxies = append(proxies, p)
	}
	nosum := rootPath
	if n := strings.TrimSpace(string(nosumdb)); n != "" {
		nosum += "," + n
	}
	return []string{
		"GOWORK=off",
		"GOFLAGS=-mod=mod",
		"GOPROXY=" + strings.Join(proxies, ","),
		"GONOSUMDB=" + nosum,
		"GOMODCACHE=" + modcache,
	}, nil
}

// consume installs module m at version v in a fresh consumer module under
// dir, as `go get` would for a user, then builds and runs its program. It
// returns the program's last line.
func consume(dir string, env []string, m modEntry, v string) (string, error) {
	src := "testdata/consumer/" + m.Name
	entries, err := fs.ReadDir(consumers, src)
	if err != nil {
		return "", fmt.Errorf("no consumer program for %s: write internal/release/%s/main.go", m.Path, src)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// A BUILD file names the module's commands (an example service): the
	// consumer builds them from the module cache instead of running a
	// program of its own.
	var build []string
	for _, e := range entries {
		data, err := consumers.ReadFile(src + "/" + e.Name())
		if err != nil {
			return "", err
		}
		if e.Name() == "BUILD" {
			for _, line := range strings.Split(string(data), "\n") {
				if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
					build = append(build, line)
				}
			}
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			return "", err
		}
	}
	gomod := "module example.com/consumer/" + m.Name + "\n\ngo 1.26.0\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		return "", err
	}
	if len(build) > 0 {
		if _, err := output(dir, env, "go", "get", m.Path+"@"+v); err != nil {
			return "", err
		}
		for _, pkg := range build {
			if _, err := output(dir, env, "go", "build", "-o", filepath.Join(dir, "cmd"), pkg); err != nil {
				return "", err
			}
		}
		return "built " + strings.Join(build, ", "), nil
	}
	steps := [][]string{
		{"get", m.Path + "@" + v},
		{"mod", "tidy"},
		{"build", "-o", "consumer", "."},
	}
	for _, s := range steps {
		if _, err := output(dir, env, "go", s...); err != nil {
			return "", err
		}
	}
	// The consumer must have the module at v, not another version.
	got, err := output(dir, env, "go", "list", "-m", "-f", "{{.Version}}", m.Path)
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(string(got)) != v {
		return "", fmt.Errorf("the consumer has %s at %s, want %s", m.Path, strings.TrimSpace(string(got)), v)
	}
	out, err := output(dir, env, filepath.Join(dir, "consumer"))
	if err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}
