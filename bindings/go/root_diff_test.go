package sandgate_test

// A differential test: every row runs on two identical fresh trees, one
// through Go's os.Root and one through sandgate.Root (with each resolver),
// and the outcomes must be the same — same content, same tree afterwards,
// same error category — except for the rows that carry a documented
// difference (README.md, "Differences from os.Root"), which assert exactly
// that difference.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/sandgate-dev/sandgate/bindings/go"
)

// rootAPI is the part of os.Root's method set the rows use; both *os.Root
// and *sandgate.Root satisfy it.
type rootAPI interface {
	Name() string
	Open(string) (*os.File, error)
	Create(string) (*os.File, error)
	OpenFile(string, int, os.FileMode) (*os.File, error)
	Mkdir(string, os.FileMode) error
	MkdirAll(string, os.FileMode) error
	ReadFile(string) ([]byte, error)
	WriteFile(string, []byte, os.FileMode) error
	FS() fs.FS
	Remove(string) error
	Stat(string) (fs.FileInfo, error)
	Lstat(string) (fs.FileInfo, error)
	Readlink(string) (string, error)
	Rename(string, string) error
	Close() error
}

var (
	_ rootAPI = (*os.Root)(nil)
	_ rootAPI = (*sandgate.Root)(nil)
)

// diffTree builds the shared tree: base/root is the root, base/outside
// holds what must never be reached.
func diffTree(t *testing.T) (base, root string) {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root = filepath.Join(base, "root")
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"root/dir/sub", "root/empty", "outside"} {
		must(os.MkdirAll(filepath.Join(base, d), 0o755))
	}
	files := map[string]string{
		"root/a.txt": "A", "root/dir/b.txt": "B", "root/dir/sub/c.txt": "C",
		"outside/secret.txt": "SECRET",
	}
	for p, c := range files {
		must(os.WriteFile(filepath.Join(base, p), []byte(c), 0o644))
	}
	links := map[string]string{
		"link_a": "a.txt", "link_dir": "dir", "chain1": "chain2", "chain2": "link_a",
		"up_in": "dir/../a.txt", "dir/up": "../a.txt", "dir/sub/upup": "../../a.txt",
		"esc": "../outside/secret.txt", "esc_dir": "../outside",
		"abs_in": filepath.Join(root, "a.txt"), "abs_out": "/etc/passwd",
		"dangling": "nothere", "dangling_dir": "nodir/x", "loop1": "loop2", "loop2": "loop1",
		"dotdot_link": "..", "dot_link": ".",
	}
	for name, target := range links {
		must(os.Symlink(target, filepath.Join(root, name)))
	}
	return base, root
}

// snapshot lists the whole tree (root and outside): path, type and content
// or link target.
func snapshot(base string) string {
	var lines []string
	filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == base {
			return nil
		}
		rel, _ := filepath.Rel(base, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			tgt, _ := os.Readlink(p)
			lines = append(lines, rel+" -> "+strings.TrimPrefix(tgt, base))
		case d.IsDir():
			lines = append(lines, rel+"/")
		default:
			b, _ := os.ReadFile(p)
			lines = append(lines, rel+" = "+string(b))
		}
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// category is an error's outcome class, decided with errors.Is where a
// class has an io/fs sentinel.
func category(err error) string {
	var se *sandgate.Error
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, sandgate.ErrPathEscape):
		return "escape"
	case strings.HasSuffix(err.Error(), "path escapes from parent"): // os.Root's unexported errPathEscapes
		return "escape"
	case strings.HasSuffix(err.Error(), ": not a directory"): // os.Root.OpenRoot's errors.New("not a directory")
		return "not-dir"
	case errors.Is(err, sandgate.ErrPathInvalid):
		return "invalid-name"
	case errors.Is(err, fs.ErrNotExist):
		return "not-exist"
	case errors.Is(err, fs.ErrExist): // EEXIST and ENOTEMPTY, E_EXISTS and E_NOT_EMPTY
		return "exist"
	case errors.Is(err, fs.ErrPermission):
		return "permission"
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, sandgate.ErrNotDir):
		return "not-dir"
	case errors.Is(err, syscall.EISDIR), errors.Is(err, sandgate.ErrNotFile):
		return "is-dir"
	case errors.Is(err, syscall.ELOOP), errors.Is(err, sandgate.ErrLoop):
		return "loop"
	case errors.Is(err, syscall.EINVAL):
		return "invalid"
	case errors.As(err, &se):
		return "sandgate:" + string(se.Code)
	}
	return "other:" + err.Error()
}

// errShape checks that an error has os.Root's shape: *os.PathError, or
// *os.LinkError for Rename.
func errShape(err error, op string) string {
	if err == nil {
		return ""
	}
	var pe *os.PathError
	var le *os.LinkError
	switch {
	case op == "rename" && errors.As(err, &le):
		return ""
	case op != "rename" && errors.As(err, &pe):
		return ""
	}
	return fmt.Sprintf(" [bad error type %T]", err)
}

func describeInfo(fi fs.FileInfo) string {
	s := fmt.Sprintf("name=%s type=%v perm=%v", fi.Name(), fi.Mode().Type(), fi.Mode().Perm())
	if fi.Mode().IsRegular() {
		s += fmt.Sprintf(" size=%d", fi.Size())
	}
	return s
}

func readAll(f *os.File, rootName string) string {
	defer f.Close()
	name := strings.TrimPrefix(f.Name(), rootName)
	fi, err := f.Stat()
	if err != nil {
		return "stat failed: " + err.Error()
	}
	if fi.IsDir() {
		names, err := f.Readdirnames(-1)
		if err != nil {
			return "readdir failed: " + category(err)
		}
		sort.Strings(names)
		return name + " dir[" + strings.Join(names, ",") + "]"
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return name + " read failed: " + category(err)
	}
	return name + " file:" + string(b)
}

type diffRow struct {
	name string
	op   string // open, create, openfile, mkdir, remove, rename, stat, lstat, readlink, openroot
	arg  string
	arg2 string // rename's new name; openroot: a name to open in the new root
	flag int    // openfile
	// osWant/sgWant, when set, are the documented difference: the
	// outcomes (category) each side must give.
	osWant, sgWant string
	why            string
}

func runRow(r rootAPI, base string, row diffRow) string {
	var out string
	var err error
	switch row.op {
	case "open", "create", "openfile":
		var f *os.File
		switch row.op {
		case "open":
			f, err = r.Open(row.arg)
		case "create":
			f, err = r.Create(row.arg)
			if err == nil {
				f.WriteString("NEW")
			}
		default:
			f, err = r.OpenFile(row.arg, row.flag, 0o644)
			if err == nil && row.flag&(os.O_WRONLY|os.O_RDWR) != 0 {
				f.WriteString("NEW")
			}
		}
		if err == nil {
			if row.op == "open" {
				out = readAll(f, r.Name())
			} else {
				out = strings.TrimPrefix(f.Name(), r.Name())
				f.Close()
			}
		}
	case "mkdir":
		err = r.Mkdir(row.arg, 0o755)
	case "mkdirall":
		err = r.MkdirAll(row.arg, 0o755)
	case "readfile":
		var b []byte
		if b, err = r.ReadFile(row.arg); err == nil {
			out = string(b)
		}
	case "writefile":
		err = r.WriteFile(row.arg, []byte("W"), 0o644)
	case "fsreaddir":
		var des []fs.DirEntry
		if des, err = fs.ReadDir(r.FS(), row.arg); err == nil {
			for _, d := range des {
				out += d.Name() + ":" + d.Type().String() + " "
			}
		}
	case "remove":
		err = r.Remove(row.arg)
	case "rename":
		err = r.Rename(row.arg, row.arg2)
	case "stat", "lstat":
		var fi fs.FileInfo
		if row.op == "stat" {
			fi, err = r.Stat(row.arg)
		} else {
			fi, err = r.Lstat(row.arg)
		}
		if err == nil {
			out = describeInfo(fi)
		}
	case "readlink":
		out, err = r.Readlink(row.arg)
		out = strings.TrimPrefix(out, base)
	case "openroot":
		var sub rootAPI
		switch rr := r.(type) {
		case *os.Root:
			var s *os.Root
			if s, err = rr.OpenRoot(row.arg); err == nil {
				sub = s
			}
		case *sandgate.Root:
			var s *sandgate.Root
			if s, err = rr.OpenRoot(row.arg); err == nil {
				sub = s
			}
		}
		if err == nil {
			out = "name=" + strings.TrimPrefix(sub.Name(), r.Name())
			f, err2 := sub.Open(row.arg2)
			if err2 != nil {
				out += " then " + category(err2)
			} else {
				out += " then " + readAll(f, sub.Name())
			}
			sub.Close()
		}
	default:
		panic(row.op)
	}
	if err != nil {
		return category(err) + errShape(err, row.op)
	}
	return "ok " + out
}

var diffRows = []diffRow{
	// Open: plain names, `.` components, `..` inside and escaping.
	{name: "open_file", op: "open", arg: "a.txt"},
	{name: "open_nested", op: "open", arg: "dir/b.txt"},
	{name: "open_dot_prefix", op: "open", arg: "./a.txt"},
	{name: "open_dot_inside", op: "open", arg: "dir/./b.txt"},
	{name: "open_double_slash", op: "open", arg: "dir//b.txt"},
	{name: "open_dotdot_inside", op: "open", arg: "dir/../a.txt"},
	{name: "open_dotdot_deep_inside", op: "open", arg: "dir/sub/../../a.txt"},
	{name: "open_dotdot_escape", op: "open", arg: "../outside/secret.txt"},
	{name: "open_dotdot_escape_via_dir", op: "open", arg: "dir/../../outside/secret.txt"},
	{name: "open_dotdot_alone", op: "open", arg: ".."},
	{name: "open_missing", op: "open", arg: "missing.txt"},
	{name: "open_missing_parent", op: "open", arg: "nodir/x.txt"},
	{name: "open_file_as_dir", op: "open", arg: "a.txt/x"},
	{name: "open_empty_name", op: "open", arg: "", osWant: "other:openat : empty path", sgWant: "not-exist", why: "empty name"},
	{name: "open_root_dot", op: "open", arg: "."},
	{name: "open_directory", op: "open", arg: "dir"},
	{name: "open_directory_trailing_slash", op: "open", arg: "dir/"},
	{name: "open_file_trailing_slash", op: "open", arg: "a.txt/"},
	{name: "open_dir_dotdot_trailing", op: "open", arg: "dir/../"},
	{name: "open_absolute_name", op: "open", arg: "/etc/passwd"},
	// Symlinks.
	{name: "open_symlink_inside", op: "open", arg: "link_a"},
	{name: "open_symlink_chain", op: "open", arg: "chain1"},
	{name: "open_symlink_dotdot_inside", op: "open", arg: "up_in"},
	{name: "open_symlink_in_subdir_up", op: "open", arg: "dir/up"},
	{name: "open_symlink_two_up", op: "open", arg: "dir/sub/upup"},
	{name: "open_symlink_escaping", op: "open", arg: "esc"},
	{name: "open_through_escaping_dir_link", op: "open", arg: "esc_dir/secret.txt"},
	{name: "open_absolute_symlink_inside", op: "open", arg: "abs_in"},
	{name: "open_absolute_symlink_outside", op: "open", arg: "abs_out"},
	{name: "open_dangling", op: "open", arg: "dangling"},
	{name: "open_loop", op: "open", arg: "loop1"},
	{name: "open_dir_symlink_component", op: "open", arg: "link_dir/b.txt"},
	{name: "open_dir_symlink_trailing_slash", op: "open", arg: "link_dir/"},
	{name: "open_file_symlink_trailing_slash", op: "open", arg: "link_a/"},
	{name: "open_dotdot_link", op: "open", arg: "dotdot_link/outside/secret.txt"},
	{name: "open_dot_link", op: "open", arg: "dot_link/a.txt"},
	{name: "open_nofollow_symlink", op: "openfile", arg: "link_a", flag: os.O_RDONLY | syscall.O_NOFOLLOW, osWant: "ok", sgWant: "loop", why: "O_NOFOLLOW is honoured"},
	// Create and OpenFile.
	{name: "create_new", op: "create", arg: "new.txt"},
	{name: "create_truncates_existing", op: "create", arg: "a.txt"},
	{name: "create_in_subdir", op: "create", arg: "dir/new.txt"},
	{name: "create_missing_parent", op: "create", arg: "nodir/new.txt"},
	{name: "create_through_dangling_link", op: "create", arg: "dangling", osWant: "ok", sgWant: "sandgate:E_SYMLINK", why: "never create through a dangling symlink"},
	{name: "create_excl_through_dangling_link", op: "openfile", arg: "dangling", flag: os.O_RDWR | os.O_CREATE | os.O_EXCL},
	{name: "create_excl_existing", op: "openfile", arg: "a.txt", flag: os.O_RDWR | os.O_CREATE | os.O_EXCL},
	{name: "create_through_symlink_inside", op: "create", arg: "link_a"},
	{name: "create_through_escaping_link", op: "create", arg: "esc"},
	{name: "create_escaping_name", op: "create", arg: "../outside/new.txt"},
	{name: "create_on_directory", op: "create", arg: "dir"},
	{name: "create_trailing_slash", op: "create", arg: "newdir/", osWant: "not-exist", sgWant: "is-dir", why: "creating a name with a trailing slash: the kernel's EISDIR"},
	{name: "openfile_append", op: "openfile", arg: "a.txt", flag: os.O_WRONLY | os.O_APPEND},
	// Mkdir.
	{name: "mkdir_new", op: "mkdir", arg: "newdir"},
	{name: "mkdir_nested_new", op: "mkdir", arg: "dir/newdir"},
	{name: "mkdir_existing_dir", op: "mkdir", arg: "dir"},
	{name: "mkdir_existing_file", op: "mkdir", arg: "a.txt"},
	{name: "mkdir_missing_parent", op: "mkdir", arg: "nodir/x"},
	{name: "mkdir_escaping", op: "mkdir", arg: "../outside/new"},
	{name: "mkdir_through_escaping_dir_link", op: "mkdir", arg: "esc_dir/new"},
	{name: "mkdir_on_dangling_link", op: "mkdir", arg: "dangling"},
	{name: "mkdir_trailing_slash", op: "mkdir", arg: "newdir/"},
	{name: "mkdir_dot", op: "mkdir", arg: "."},
	// MkdirAll, ReadFile, WriteFile, FS.
	{name: "mkdirall_nested_new", op: "mkdirall", arg: "x/y/z"},
	{name: "mkdirall_existing", op: "mkdirall", arg: "dir/sub"},
	{name: "mkdirall_under_existing", op: "mkdirall", arg: "dir/sub/new/deeper"},
	{name: "mkdirall_through_file", op: "mkdirall", arg: "a.txt/x"},
	{name: "mkdirall_escaping", op: "mkdirall", arg: "../outside/new"},
	{name: "mkdirall_through_dir_link", op: "mkdirall", arg: "link_dir/new"},
	{name: "mkdirall_through_escaping_link", op: "mkdirall", arg: "esc_dir/new"},
	{name: "mkdirall_dotdot_inside", op: "mkdirall", arg: "dir/../newtop"},
	{name: "readfile_link", op: "readfile", arg: "chain1"},
	{name: "readfile_escape", op: "readfile", arg: "esc"},
	{name: "writefile_new", op: "writefile", arg: "dir/w.txt"},
	{name: "writefile_through_escaping_link", op: "writefile", arg: "esc"},
	{name: "fs_readdir_root", op: "fsreaddir", arg: "."},
	{name: "fs_readdir_dir_link", op: "fsreaddir", arg: "link_dir"},
	{name: "fs_readdir_invalid", op: "fsreaddir", arg: "../outside"},
	{name: "fs_readdir_escaping_link", op: "fsreaddir", arg: "esc_dir"},
	// Remove.
	{name: "remove_file", op: "remove", arg: "a.txt"},
	{name: "remove_empty_dir", op: "remove", arg: "empty"},
	{name: "remove_nonempty_dir", op: "remove", arg: "dir"},
	{name: "remove_dir_symlink_removes_link", op: "remove", arg: "link_dir"},
	{name: "remove_escaping_link_itself", op: "remove", arg: "esc"},
	{name: "remove_dangling_link", op: "remove", arg: "dangling"},
	{name: "remove_missing", op: "remove", arg: "missing"},
	{name: "remove_dot", op: "remove", arg: ".", osWant: "invalid", sgWant: "invalid-name", why: "'.' as the target of Remove: E_PATH_INVALID without an errno"},
	{name: "remove_trailing_slash_file", op: "remove", arg: "a.txt/"},
	{name: "remove_escaping_name", op: "remove", arg: "../outside/secret.txt"},
	{name: "remove_through_escaping_dir_link", op: "remove", arg: "esc_dir/secret.txt"},
	// Rename.
	{name: "rename_to_new_name", op: "rename", arg: "a.txt", arg2: "new.txt"},
	{name: "rename_over_existing_file", op: "rename", arg: "a.txt", arg2: "dir/b.txt"},
	{name: "rename_into_subdir", op: "rename", arg: "a.txt", arg2: "dir/sub/a.txt"},
	{name: "rename_escaping_destination", op: "rename", arg: "a.txt", arg2: "../outside/a.txt"},
	{name: "rename_escaping_source", op: "rename", arg: "../outside/secret.txt", arg2: "s.txt"},
	{name: "rename_missing_source", op: "rename", arg: "missing", arg2: "x"},
	{name: "rename_onto_dot", op: "rename", arg: "a.txt", arg2: ".", osWant: "exist", sgWant: "invalid-name", why: "'.' as a Rename name: E_PATH_INVALID"},
	{name: "rename_file_over_dir", op: "rename", arg: "a.txt", arg2: "empty", osWant: "exist", sgWant: "is-dir", why: "a file renamed over a directory: the kernel's EISDIR, not Go's EEXIST"},
	{name: "rename_dir_over_nonempty_dir", op: "rename", arg: "empty", arg2: "dir"},
	{name: "rename_symlink_moves_link", op: "rename", arg: "link_a", arg2: "link_b"},
	{name: "rename_escaping_link_moves_link", op: "rename", arg: "esc", arg2: "esc2"},
	// Stat, Lstat, Readlink.
	{name: "stat_file", op: "stat", arg: "a.txt"},
	{name: "stat_dir", op: "stat", arg: "dir"},
	{name: "stat_symlink_follows", op: "stat", arg: "link_a"},
	{name: "lstat_symlink_does_not_follow", op: "lstat", arg: "link_a"},
	{name: "stat_dangling", op: "stat", arg: "dangling"},
	{name: "lstat_dangling", op: "lstat", arg: "dangling"},
	{name: "stat_escaping_link", op: "stat", arg: "esc"},
	{name: "lstat_escaping_link", op: "lstat", arg: "esc"},
	{name: "stat_dir_symlink", op: "stat", arg: "link_dir"},
	{name: "lstat_dir_symlink_trailing_slash", op: "lstat", arg: "link_dir/"},
	{name: "stat_dotdot_inside_to_root", op: "stat", arg: "dir/.."},
	{name: "stat_dotdot_escape", op: "stat", arg: ".."},
	{name: "stat_loop", op: "stat", arg: "loop1"},
	{name: "lstat_loop", op: "lstat", arg: "loop1"},
	{name: "stat_empty_name", op: "stat", arg: "", osWant: "other:statat : empty path", sgWant: "not-exist", why: "empty name"},
	{name: "lstat_file_trailing_slash", op: "lstat", arg: "a.txt/"},
	{name: "readlink_inside", op: "readlink", arg: "link_a"},
	{name: "readlink_escaping_is_stored_target", op: "readlink", arg: "esc"},
	{name: "readlink_absolute", op: "readlink", arg: "abs_out"},
	{name: "readlink_not_a_link", op: "readlink", arg: "a.txt"},
	{name: "readlink_missing", op: "readlink", arg: "missing"},
	{name: "readlink_through_dir_link", op: "readlink", arg: "link_dir/up"},
	// OpenRoot.
	{name: "openroot_subdir", op: "openroot", arg: "dir", arg2: "b.txt"},
	{name: "openroot_subdir_cannot_climb", op: "openroot", arg: "dir", arg2: "../a.txt"},
	{name: "openroot_dir_symlink", op: "openroot", arg: "link_dir", arg2: "sub/c.txt"},
	{name: "openroot_escaping_link", op: "openroot", arg: "esc_dir", arg2: "secret.txt"},
	{name: "openroot_file", op: "openroot", arg: "a.txt", arg2: "x"},
	{name: "openroot_missing", op: "openroot", arg: "missing", arg2: "x"},
}

func TestDifferentialOsRoot(t *testing.T) {
	if len(diffRows) < 40 {
		t.Fatalf("only %d rows", len(diffRows))
	}
	resolvers := []struct {
		name string
		r    sandgate.Resolver
	}{{"auto", sandgate.ResolverAuto}, {"walk", sandgate.ResolverWalk}}
	for _, row := range diffRows {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			osBase, osRootDir := diffTree(t)
			osRoot, err := os.OpenRoot(osRootDir)
			if err != nil {
				t.Fatal(err)
			}
			defer osRoot.Close()
			osOut := runRow(osRoot, osBase, row)
			osTree := strings.ReplaceAll(snapshot(osBase), osBase, "")
			t.Logf("%s %s %q %q -> %s", row.name, row.op, row.arg, row.arg2, osOut)
			for _, res := range resolvers {
				sgBase, sgRootDir := diffTree(t)
				before := strings.ReplaceAll(snapshot(sgBase), sgBase, "")
				sgRoot, err := sandgate.OpenRootWithResolver(sgRootDir, res.r)
				if err != nil {
					t.Fatal(err)
				}
				sgOut := runRow(sgRoot, sgBase, row)
				sgRoot.Close()
				sgTree := strings.ReplaceAll(snapshot(sgBase), sgBase, "")
				if row.osWant != "" {
					if !strings.HasPrefix(osOut, row.osWant) || !strings.HasPrefix(sgOut, row.sgWant) {
						t.Errorf("[%s] documented difference (%s) no longer holds:\n  os.Root:  %s (want %s)\n  sandgate: %s (want %s)",
							res.name, row.why, osOut, row.osWant, sgOut, row.sgWant)
					}
					if !strings.HasPrefix(row.sgWant, "ok") && sgTree != before {
						t.Errorf("[%s] sandgate refused but changed the tree:\n%s", res.name, lineDiff(before, sgTree))
					}
					continue
				}
				if osOut != sgOut {
					t.Errorf("[%s] %s %q %q:\n  os.Root:  %s\n  sandgate: %s", res.name, row.op, row.arg, row.arg2, osOut, sgOut)
				}
				if osTree != sgTree {
					t.Errorf("[%s] tree after differs:\n%s", res.name, lineDiff(osTree, sgTree))
				}
			}
		})
	}
}

// lineDiff lists the lines only one side has.
func lineDiff(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	var out []string
	for l := range ma {
		if !mb[l] {
			out = append(out, "  only os.Root:  "+l)
		}
	}
	for l := range mb {
		if !ma[l] {
			out = append(out, "  only sandgate: "+l)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}
