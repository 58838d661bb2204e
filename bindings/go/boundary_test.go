package sandgate_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandgate-dev/sandgate/bindings/go"
)

// A Go int handed to a 32-bit C parameter keeps its low 32 bits: a port of
// 1<<32 + 443 would be judged as 443, and open flags with a bit past 32 would
// lose it unseen. Such values are refused (E_REQUEST), not truncated.
func TestIntsOutOfACParametersRangeAreRefused(t *testing.T) {
	dir := tmp(t)
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	p, err := sandgate.NewPolicy(sandgate.BaseDir(dir), sandgate.NetAllow("example.com:443"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if d, err := p.Authorize(sandgate.AuthorizeRequest{Scheme: "https", Host: "example.com", Port: 443}); err != nil || !d.Allowed {
		t.Fatalf("port 443: %+v %v", d, err)
	}
	for _, port := range []int{1<<32 + 443, 1<<31 + 443, 1<<63 - 1, 65536} {
		d, err := p.Authorize(sandgate.AuthorizeRequest{Scheme: "https", Host: "example.com", Port: port})
		if !errors.Is(err, sandgate.ErrRequest) || d.Allowed {
			t.Errorf("port %d: %+v %v, want E_REQUEST", port, d, err)
		}
	}

	r, err := sandgate.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, flag := range []int{1<<32 | os.O_WRONLY | os.O_CREATE, -1 << 40} {
		f, err := r.OpenFile("new.txt", flag, 0o644)
		if f != nil {
			f.Close()
		}
		if !errors.Is(err, sandgate.ErrRequest) {
			t.Errorf("flags %#x: %v, want E_REQUEST", flag, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, "new.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("new.txt was created: %v", err)
	}
}

// encoding/json writes each invalid UTF-8 byte of a string as U+FFFD
// without an error: a policy stated from code with WriteRoot("w\xff") would
// grant the directory "w\uFFFD", and a deny pattern or a grep glob would be
// one the caller did not write. Such strings are refused (E_REQUEST).
func TestNonUTF8StringsSentAsJSONAreRefused(t *testing.T) {
	dir := tmp(t)
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	os.MkdirAll(filepath.Join(dir, "w\uFFFD"), 0o755)
	write(t, filepath.Join(ws, "a.txt"), "x\n")
	write(t, filepath.Join(ws, "\uFFFD.txt"), "x\n")
	for name, opts := range map[string][]sandgate.PolicyOption{
		"write_root": {sandgate.WriteRoot("w\xff")},
		"read_roots": {sandgate.ReadRoots("ws", "w\xff")},
		"deny_write": {sandgate.WriteRoot("ws"), sandgate.DenyWrite("\xff*")},
		"Set value":  {sandgate.WriteRoot("ws"), sandgate.Set("allow", []any{"example.com", "\xff.example.com"})},
		"Set key":    {sandgate.WriteRoot("ws"), sandgate.Set("fs_ops\xff", 3)},
	} {
		p, err := sandgate.NewPolicy(append(opts, sandgate.BaseDir(dir))...)
		if err == nil {
			s, _ := p.Summary()
			p.Close()
			t.Errorf("%s: granted %v, want E_REQUEST", name, s)
		} else if !errors.Is(err, sandgate.ErrRequest) {
			t.Errorf("%s: %v, want E_REQUEST", name, err)
		}
	}
	if _, err := sandgate.NewExecutorWith(sandgate.BaseDir(dir), sandgate.WriteRoot("w\xff")); !errors.Is(err, sandgate.ErrRequest) {
		t.Errorf("NewExecutorWith: %v, want E_REQUEST", err)
	}

	sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(ws))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if m, err := sb.GrepFiles("x", sandgate.GrepGlob("\xff.txt")); !errors.Is(err, sandgate.ErrRequest) {
		t.Errorf("grep glob: %v %v, want E_REQUEST", m, err)
	}
}

// A host directory with a NUL byte names no directory: it is refused as
// E_PATH_INVALID naming the NUL, not cut at it (which would open the
// directory before it) nor answered as an I/O error.
func TestBind9HostDirectoriesWithANulAreRefusedNamingIt(t *testing.T) {
	dir := t.TempDir()
	for name, open := range map[string]func(string) error{
		"OpenRoot": func(d string) error {
			r, err := sandgate.OpenRoot(d)
			if err == nil {
				r.Close()
			}
			return err
		},
		"WithReadRoots": func(d string) error {
			sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(d))
			if err == nil {
				sb.Close()
			}
			return err
		},
		"WithWriteRoot": func(d string) error {
			sb, err := sandgate.NewSandbox(sandgate.WithWriteRoot(d))
			if err == nil {
				sb.Close()
			}
			return err
		},
	} {
		for _, d := range []string{dir + "\x00", dir + "\x00/../x", dir + "/\x00"} {
			err := open(d)
			if !errors.Is(err, sandgate.ErrPathInvalid) || !strings.Contains(err.Error(), "NUL") {
				t.Errorf("%s(%q): %v, want E_PATH_INVALID naming the NUL byte", name, d, err)
			}
		}
	}
}

// A glob too complex for the matcher to compile (100,000 '*') is the
// pattern's fault: E_REQUEST, as glob's pattern and as Grep's GrepGlob,
// not E_INTERNAL from a panic in the library's matcher.
func TestFfi17AGlobTooComplexToCompileIsARequestError(t *testing.T) {
	ws := filepath.Join(tmp(t), "ws")
	os.MkdirAll(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hit\n"), 0o644)
	s, err := sandgate.NewSandbox(sandgate.WithReadRoots(ws))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	huge := strings.Repeat("*", 100_000)
	if _, err := s.Glob(huge, ""); !errors.Is(err, sandgate.ErrRequest) || len(err.Error()) > 300 {
		t.Errorf("glob: %.300v, want a short E_REQUEST", err)
	}
	if _, err := s.Grep("hit", sandgate.GrepGlob(huge)); !errors.Is(err, sandgate.ErrRequest) {
		t.Errorf("grep: %.300v, want E_REQUEST", err)
	}
	if got, err := s.Glob("*.txt", ""); err != nil || len(got) != 1 || got[0] != "a.txt" {
		t.Errorf("a glob after it: %v %v", got, err)
	}
}

// A []byte option value went out as JSON's base64: Set("write_root",
// []byte("ws")) stated the root "d3M=", a directory the caller did not
// name (and granted it where one by that name existed). No policy key
// takes bytes: such a value is refused (E_REQUEST) naming the option, as
// a string that is not UTF-8 is; the other doors have no bytes to send.
func TestHostapi18ByteOptionsAreRefusedNotSentAsBase64(t *testing.T) {
	dir := tmp(t)
	os.MkdirAll(filepath.Join(dir, "ws"), 0o755)
	os.MkdirAll(filepath.Join(dir, "d3M="), 0o755)
	for name, opt := range map[string]sandgate.PolicyOption{
		"write_root": sandgate.Set("write_root", []byte("ws")),
		"read_roots": sandgate.Set("read_roots", []any{"ws", []byte("ws")}),
		"fs":         sandgate.Set("fs", map[string]any{"deny_write": [][]byte{[]byte("*.lock")}}),
	} {
		p, err := sandgate.NewPolicy(sandgate.BaseDir(dir), opt)
		if err == nil {
			s, _ := p.Summary()
			p.Close()
			t.Errorf("%s: granted %v, want E_REQUEST", name, s)
			continue
		}
		if !errors.Is(err, sandgate.ErrRequest) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want E_REQUEST naming it", name, err)
		}
	}
	// A number of the wrong kind is E_POLICY naming its key, as in a file.
	for _, v := range []any{-1, 1.5, "5", true} {
		_, err := sandgate.NewPolicy(sandgate.BaseDir(dir), sandgate.WriteRoot("ws"),
			sandgate.ExecEnabled(true), sandgate.Set("timeout_ms", v))
		var se *sandgate.Error
		if !errors.As(err, &se) || !errors.Is(err, sandgate.ErrPolicy) || se.Key != "exec.timeout_ms" {
			t.Errorf("timeout_ms %v: %v, want E_POLICY with key exec.timeout_ms", v, err)
		}
	}
}

// Root.OpenFile and Root.Mkdir take permission bits only; the refusal of
// any other bit is E_REQUEST naming the mode, as in Python and Node (it
// was a bare "unsupported file mode" error that no sentinel matched).
func TestBindcons21RootModesBeyond0o777AreARequestError(t *testing.T) {
	dir := tmp(t)
	r, err := sandgate.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, perm := range []os.FileMode{0o4755, os.ModeSetuid | 0o755, os.ModeSetgid | 0o755, os.ModeSticky | 0o777} {
		if f, err := r.OpenFile("s.txt", os.O_WRONLY|os.O_CREATE, perm); !errors.Is(err, sandgate.ErrRequest) || !strings.Contains(err.Error(), "unsupported file mode") || !strings.Contains(err.Error(), "mode") {
			if f != nil {
				f.Close()
			}
			t.Errorf("OpenFile perm %v: %v, want E_REQUEST naming the mode", perm, err)
		}
		if err := r.Mkdir("s", perm); !errors.Is(err, sandgate.ErrRequest) || !strings.Contains(err.Error(), "unsupported file mode") {
			t.Errorf("Mkdir perm %v: %v, want E_REQUEST naming the mode", perm, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("refused calls created %v", ents)
	}
}
