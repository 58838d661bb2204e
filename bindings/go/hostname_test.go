package sandgate_test

// HostName and HostWriteName: host paths (absolute, inside a granted
// root) mapped to root-relative names component by component, never by
// string prefix.

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandgate-dev/sandgate/bindings/go"
)

func TestHostNameMapsByComponentsNeverByPrefix(t *testing.T) {
	d := tmp(t)
	app, secrets, docs := filepath.Join(d, "app"), filepath.Join(d, "app-secrets"), filepath.Join(d, "docs")
	write(t, filepath.Join(app, "src", "a.go"), "package a")
	write(t, filepath.Join(secrets, "key"), "secret")
	write(t, filepath.Join(docs, "x.md"), "x")
	sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(app, docs), sandgate.WithWriteRoot(app))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	cases := []struct {
		path  string
		write bool
		want  string
		err   error
	}{
		{filepath.Join(app, "src", "a.go"), false, "src/a.go", nil},
		{app, false, ".", nil},
		{filepath.Join(app, "src") + "/", false, "src/", nil},
		{"src/a.go", false, "src/a.go", nil},
		{filepath.Join(docs, "x.md"), false, "x.md", nil},
		{filepath.Join(app, "new.txt"), true, "new.txt", nil},
		{filepath.Join(secrets, "key"), false, "", sandgate.ErrPathEscape},
		{filepath.Join(secrets, "key"), true, "", sandgate.ErrPathEscape},
		{d, false, "", sandgate.ErrPathEscape},
		{"/etc/passwd", false, "", sandgate.ErrPathEscape},
		{filepath.Join(docs, "x.md"), true, "", sandgate.ErrDenied},
		// A climb maps to a name with "..", which every operation refuses.
		{app + "/../app-secrets/key", false, "../app-secrets/key", nil},
	}
	for _, c := range cases {
		name, err := sb.HostName(c.path)
		if c.write {
			name, err = sb.HostWriteName(c.path)
		}
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("host name of %q (write %v) = %q, %v; want %v", c.path, c.write, name, err, c.err)
			}
			continue
		}
		if err != nil || name != c.want {
			t.Errorf("host name of %q (write %v) = %q, %v; want %q", c.path, c.write, name, err, c.want)
		}
	}
	if _, err := sb.Read("../app-secrets/key"); !errors.Is(err, sandgate.ErrPathInvalid) {
		t.Fatalf("the climbed name was not refused: %v", err)
	}
}

func TestHostNameTakesASymlinkedRootSpelledBothWays(t *testing.T) {
	d := tmp(t)
	realDir, link := filepath.Join(d, "real"), filepath.Join(d, "link")
	write(t, filepath.Join(realDir, "a.txt"), "a")
	if err := os.Symlink(realDir, link); err != nil {
		t.Fatal(err)
	}
	sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(link), sandgate.WithWriteRoot(link))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	for _, root := range []string{link, realDir} {
		name, err := sb.HostName(filepath.Join(root, "a.txt"))
		if err != nil || name != "a.txt" {
			t.Fatalf("HostName via %s = %q, %v", root, name, err)
		}
		if b, err := sb.Read(name); err != nil || string(b) != "a" {
			t.Fatalf("Read(%q) = %q, %v", name, b, err)
		}
		if name, err := sb.HostWriteName(filepath.Join(root, "b.txt")); err != nil || name != "b.txt" {
			t.Fatalf("HostWriteName via %s = %q, %v", root, name, err)
		}
	}
	if _, err := sb.HostName(link + "-other/a.txt"); !errors.Is(err, sandgate.ErrPathEscape) {
		t.Fatalf("a sibling of the link was taken for the root: %v", err)
	}
}
