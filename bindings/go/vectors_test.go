package sandgate_test

// Runs the shared vectors in ../../tests/vectors (format: that directory's
// README.md): one subtest per case, named after it. Wire cases and wire
// steps are skipped (this binding has no JSON-lines endpoint); see
// skippedVectors for the cases skipped for another reason.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sandgate-dev/sandgate/bindings/go"
)

const vectorsDir = "../../tests/vectors"

// skippedVectors are the non-wire cases this binding cannot run, with the
// reason (also listed in README.md). None at present.
var skippedVectors = map[string]string{}

type vcase struct {
	file string
	body map[string]any
}

func loadVectors(t *testing.T) []vcase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(vectorsDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no vector files in %s (%v)", vectorsDir, err)
	}
	sort.Strings(files)
	var out []vcase
	seen := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Cases []map[string]any `json:"cases"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, c := range doc.Cases {
			name, _ := c["name"].(string)
			if name == "" || seen[name] {
				t.Fatalf("%s: missing or duplicate case name %q", f, name)
			}
			seen[name] = true
			out = append(out, vcase{file: filepath.Base(f), body: c})
		}
	}
	return out
}

func TestVectors(t *testing.T) {
	cases := loadVectors(t)
	if len(cases) < 100 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, c := range cases {
		name := c.body["name"].(string)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if c.body["wire"] == true {
				t.Skip("wire case: about the JSON-lines endpoint, which this binding does not have")
			}
			if why, ok := skippedVectors[name]; ok {
				t.Skip(why)
			}
			runVector(t, c)
		})
	}
}

func caseDir(t *testing.T) string {
	t.Helper()
	tmp := t.TempDir()
	// Cleanups run last-in first-out: make everything writable before the
	// TempDir removal, since trees may chmod directories.
	t.Cleanup(func() {
		filepath.WalkDir(tmp, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chmod(p, 0o755)
			}
			return nil
		})
	})
	dir, err := filepath.EvalSymlinks(tmp)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func str(m map[string]any, k string) (string, bool) {
	v, ok := m[k].(string)
	return v, ok
}

func setMode(p string, e map[string]any) error {
	if m, ok := str(e, "mode"); ok {
		mode, err := strconv.ParseUint(m, 8, 32)
		if err != nil {
			return err
		}
		return os.Chmod(p, os.FileMode(mode))
	}
	return nil
}

func buildTree(dir string, c map[string]any) error {
	tree, _ := c["tree"].([]any)
	for _, raw := range tree {
		e := raw.(map[string]any)
		rel := e["path"].(string)
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o777); err != nil {
			return err
		}
		var err error
		if s, ok := str(e, "file"); ok {
			err = os.WriteFile(p, []byte(s), 0o666)
		} else if s, ok := str(e, "file_base64"); ok {
			var b []byte
			if b, err = base64.StdEncoding.DecodeString(s); err == nil {
				err = os.WriteFile(p, b, 0o666)
			}
		} else if e["dir"] == true {
			err = os.MkdirAll(p, 0o777)
		} else if s, ok := str(e, "symlink"); ok {
			err = os.Symlink(strings.ReplaceAll(s, "{case_dir}", dir), p)
		} else if s, ok := str(e, "hardlink"); ok {
			err = os.Link(filepath.Join(dir, s), p)
		} else {
			return fmt.Errorf("tree %q: unknown entry kind", rel)
		}
		if err != nil {
			return fmt.Errorf("tree %q: %v", rel, err)
		}
		if err := setMode(p, e); err != nil {
			return err
		}
	}
	policy := strings.ReplaceAll(c["policy"].(string), "{case_dir}", dir)
	return os.WriteFile(filepath.Join(dir, "policy.toml"), []byte(policy), 0o666)
}

// session is what a vector's steps run against.
type session struct {
	policy  *sandgate.Policy
	sandbox *sandgate.Sandbox
	exec    *sandgate.Executor
	fetch   *sandgate.Fetcher
}

func openSession(path string) (*session, error) {
	p, err := sandgate.LoadPolicy(path)
	if err != nil {
		return nil, err
	}
	sb, err := sandgate.SandboxFromPolicy(p)
	if err != nil {
		p.Close()
		return nil, err
	}
	x, err := sandgate.NewExecutor(p)
	if err != nil {
		sb.Close()
		p.Close()
		return nil, err
	}
	f, err := sandgate.NewFetcher(p)
	if err != nil {
		x.Close()
		sb.Close()
		p.Close()
		return nil, err
	}
	return &session{policy: p, sandbox: sb, exec: x, fetch: f}, nil
}

func (s *session) close() {
	s.fetch.Close()
	s.exec.Close()
	s.sandbox.Close()
	s.policy.Close()
}

func runVector(t *testing.T, c vcase) {
	dir := caseDir(t)
	if err := buildTree(dir, c.body); err != nil {
		t.Fatalf("building the tree: %v", err)
	}
	s, err := openSession(filepath.Join(dir, "policy.toml"))
	if pe, ok := c.body["policy_error"].(map[string]any); ok {
		if err == nil {
			s.close()
			t.Fatalf("the policy loaded; want it refused with %v", pe)
		}
		var se *sandgate.Error
		if !errors.As(err, &se) {
			t.Fatalf("not a *sandgate.Error: %v", err)
		}
		if string(se.Code) != pe["code"] {
			t.Errorf("policy refused with %s, want %v (%v)", se.Code, pe["code"], err)
		}
		if k, ok := pe["key"]; ok && se.Key != k {
			t.Errorf("policy refused naming key %q, want %v", se.Key, k)
		}
		return
	}
	if err != nil {
		t.Fatalf("the policy was refused: %v", err)
	}
	steps, _ := c.body["steps"].([]any)
	for i, raw := range steps {
		step := raw.(map[string]any)
		if step["wire"] == true {
			continue // JSON-lines only; refuses and changes nothing
		}
		req := step["request"].(map[string]any)
		if why := inexpressible(req); why != "" {
			t.Logf("step %d skipped: %s", i, why)
			continue
		}
		answer := s.do(req)
		js, _ := json.Marshal(answer)
		var generic any
		_ = json.Unmarshal(js, &generic)
		label := fmt.Sprintf("step %d %s", i, shorten(mustJSON(req)))
		for _, d := range checkAnswer(step["expect"].(map[string]any), generic.(map[string]any)) {
			t.Errorf("%s: %s", label, d)
		}
		if req["op"] != "summary" && strings.Contains(string(js), dir) {
			t.Errorf("%s: the answer names a host path: %s", label, js)
		}
	}
	s.close()
	for _, d := range checkTreeAfter(dir, c.body) {
		t.Error(d)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func shorten(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// inexpressible says why a non-wire request has no spelling in the typed
// API ("" when it has one). FetchOptions' zero Timeout and MaxBytes mean
// the library's default, so an explicit timeout_ms or max_bytes of 0 (a
// request the endpoint refuses with E_REQUEST, spending nothing) cannot be
// sent.
func inexpressible(req map[string]any) string {
	if req["op"] != "fetch" {
		return ""
	}
	for _, k := range []string{"timeout_ms", "max_bytes"} {
		if v, ok := req[k].(float64); ok && v == 0 {
			return "an explicit " + k + " of 0: FetchOptions reads 0 as the default"
		}
	}
	return ""
}

func errAnswer(err error) map[string]any {
	var se *sandgate.Error
	if !errors.As(err, &se) {
		se = &sandgate.Error{Code: "NOT_A_SANDGATE_ERROR", Message: err.Error()}
	}
	e := map[string]any{"code": string(se.Code), "message": se.Message}
	var fe *sandgate.FetchError
	if errors.As(err, &fe) {
		e["hops"] = hopsAnswer(fe.Hops)
		if fe.Rule != "" {
			e["rule"] = fe.Rule
		}
	}
	if se.Path != "" {
		e["path"] = se.Path
	}
	if se.Pattern != "" {
		e["pattern"] = se.Pattern
	}
	if se.Key != "" {
		e["key"] = se.Key
	}
	return map[string]any{"ok": false, "error": e}
}

func putText(out map[string]any, key string, b []byte) {
	if utf8.Valid(b) {
		out[key] = string(b)
	} else {
		out[key+"_base64"] = base64.StdEncoding.EncodeToString(b)
	}
}

// hopsAnswer is the answer shape of hops: status and rule are null when
// absent.
func hopsAnswer(hops []sandgate.Hop) []any {
	out := []any{}
	for _, h := range hops {
		m := map[string]any{"url": h.URL, "method": h.Method, "addresses": h.Addresses,
			"status": nil, "allowed": h.Allowed, "reason": h.Reason, "rule": nil}
		if h.Status != 0 {
			m["status"] = h.Status
		}
		if h.Rule != "" {
			m["rule"] = h.Rule
		}
		out = append(out, m)
	}
	return out
}

func num(req map[string]any, k string) (int, bool) {
	v, ok := req[k].(float64)
	return int(v), ok
}

// do maps one JSON endpoint request to the binding's API and converts the result to
// the JSON endpoint's answer shape.
func (s *session) do(req map[string]any) map[string]any {
	out := map[string]any{"ok": true}
	sb := s.sandbox
	path, _ := str(req, "path")
	var err error
	switch req["op"] {
	case "summary":
		var m map[string]any
		if m, err = s.policy.Summary(); err == nil {
			out["summary"] = m
		}
	case "read":
		offset, hasOff := num(req, "offset")
		limit, hasLim := num(req, "limit")
		if !hasOff && !hasLim {
			var b []byte
			if b, err = sb.Read(path); err == nil {
				out["size"] = len(b)
				putText(out, "content", b)
			}
		} else {
			if !hasOff {
				offset = 1
			}
			if !hasLim {
				limit = sandgate.MaxRangeLines
			}
			var l *sandgate.Lines
			if l, err = sb.ReadLines(path, offset, limit); err == nil {
				out["size"] = len(l.Content)
				out["offset"] = l.Offset
				out["limit"] = limit
				out["lines"] = l.Lines
				out["total_lines"] = l.TotalLines
				out["truncated"] = l.Truncated
				putText(out, "content", l.Content)
			}
		}
	case "write":
		var data []byte
		if t, ok := str(req, "content"); ok {
			data = []byte(t)
		} else if b, ok := str(req, "content_base64"); ok {
			data, err = base64.StdEncoding.DecodeString(b)
		}
		overwrite, _ := req["overwrite"].(bool)
		if err == nil {
			var n uint64
			if n, err = sb.Write(path, data, overwrite); err == nil {
				out["size"] = n
			}
		}
	case "edit":
		old, _ := str(req, "old")
		nw, _ := str(req, "new")
		all, _ := req["all"].(bool)
		var n uint64
		if n, err = sb.Edit(path, old, nw, all); err == nil {
			out["replacements"] = n
		}
	case "list":
		var es []sandgate.Entry
		if es, err = sb.List(path); err == nil {
			out["entries"] = es
		}
	case "stat":
		var st sandgate.StatInfo
		if st, err = sb.Stat(path); err == nil {
			out["kind"], out["size"], out["mode"] = st.Kind, st.Size, st.Mode
		}
	case "mkdir":
		err = sb.Mkdir(path)
	case "delete":
		err = sb.Delete(path)
	case "rename":
		from, _ := str(req, "from")
		to, _ := str(req, "to")
		err = sb.Rename(from, to)
	case "glob":
		pat, _ := str(req, "pattern")
		var ps []string
		if ps, err = sb.Glob(pat, path); err == nil {
			out["paths"] = ps
		}
	case "grep":
		pat, _ := str(req, "pattern")
		var opts []sandgate.GrepOption
		if _, ok := req["path"]; ok {
			opts = append(opts, sandgate.GrepIn(path))
		}
		if n, ok := num(req, "max_results"); ok {
			opts = append(opts, sandgate.GrepMaxResults(n))
		}
		var ms []sandgate.Match
		var cut sandgate.Cut
		if ms, err = sb.Grep(pat, append(opts, sandgate.GrepReport(&cut))...); err == nil {
			out["matches"] = ms
			if cut.Binary > 0 {
				out["binary"] = cut.Binary
			}
		}
	case "exec":
		cmd, _ := str(req, "command")
		cwd, _ := str(req, "cwd")
		var opts = sandgate.ExecOptions{Cwd: cwd}
		if ms, ok := num(req, "timeout_ms"); ok {
			opts.Timeout = time.Duration(ms) * time.Millisecond
		}
		var r *sandgate.ExecResult
		if r, err = s.exec.Exec(context.Background(), cmd, opts); err == nil {
			out["exit_code"] = r.ExitCode
			putText(out, "stdout", r.Stdout)
			putText(out, "stderr", r.Stderr)
			out["truncated"] = r.Truncated
			out["timed_out"] = r.TimedOut
			out["aborted"] = r.Aborted
			out["confined"] = r.Confinement
		}
	case "fetch":
		url, _ := str(req, "url")
		method, _ := str(req, "method")
		opts := sandgate.FetchOptions{Method: method}
		if hs, ok := req["headers"].(map[string]any); ok {
			opts.Header = http.Header{}
			for k, v := range hs {
				opts.Header[k] = []string{v.(string)}
			}
		}
		if b, ok := str(req, "body"); ok {
			opts.Body = []byte(b)
		} else if b, ok := str(req, "body_base64"); ok {
			opts.Body, err = base64.StdEncoding.DecodeString(b)
		}
		if ms, ok := num(req, "timeout_ms"); ok {
			opts.Timeout = time.Duration(ms) * time.Millisecond
		}
		if n, ok := num(req, "max_bytes"); ok {
			opts.MaxBytes = int64(n)
		}
		var r *sandgate.FetchResponse
		if err == nil {
			r, err = s.fetch.Fetch(context.Background(), url, opts)
		}
		if err == nil {
			out["status"] = r.Status
			hs := map[string]any{}
			for k, v := range r.Header {
				hs[strings.ToLower(k)] = strings.Join(v, ", ")
			}
			out["headers"] = hs
			putText(out, "body", r.Body)
			out["truncated"] = r.Truncated
			out["hops"] = hopsAnswer(r.Hops)
		}
	default:
		err = &sandgate.Error{Code: sandgate.CodeRequest, Message: fmt.Sprintf("unknown op %v", req["op"])}
	}
	if err != nil {
		return errAnswer(err)
	}
	return out
}

// matches: objects as subsets (recursively), arrays by length and in order,
// anything else by JSON equality.
func matches(expected, actual any, at string, out *[]string) {
	switch e := expected.(type) {
	case map[string]any:
		a, ok := actual.(map[string]any)
		if !ok {
			*out = append(*out, fmt.Sprintf("%s: %s, want an object %s", at, shorten(mustJSON(actual)), shorten(mustJSON(expected))))
			return
		}
		for k, ev := range e {
			av, ok := a[k]
			if !ok {
				*out = append(*out, fmt.Sprintf("%s.%s: missing, want %s", at, k, mustJSON(ev)))
				continue
			}
			matches(ev, av, at+"."+k, out)
		}
	case []any:
		a, ok := actual.([]any)
		if !ok || len(a) != len(e) {
			*out = append(*out, fmt.Sprintf("%s: %s, want %s", at, shorten(mustJSON(actual)), shorten(mustJSON(expected))))
			return
		}
		for i := range e {
			matches(e[i], a[i], fmt.Sprintf("%s[%d]", at, i), out)
		}
	default:
		if !reflect.DeepEqual(expected, actual) {
			*out = append(*out, fmt.Sprintf("%s: %s, want %s", at, shorten(mustJSON(actual)), shorten(mustJSON(expected))))
		}
	}
}

func checkAnswer(expect, answer map[string]any) []string {
	var out []string
	wantOK := expect["ok"].(bool)
	if answer["ok"] != wantOK {
		return []string{fmt.Sprintf("want ok=%v, got %s", wantOK, shorten(mustJSON(answer)))}
	}
	if wantOK {
		fields := map[string]any{}
		for k, v := range expect {
			if k != "ok" {
				fields[k] = v
			}
		}
		matches(fields, answer, "answer", &out)
		return out
	}
	e, _ := answer["error"].(map[string]any)
	for _, k := range []string{"code", "path", "pattern", "key"} {
		want, listed := expect[k]
		got, has := e[k]
		switch {
		case !listed:
		case want == nil && has:
			out = append(out, fmt.Sprintf("error.%s: %v, want none", k, got))
		case want != nil && got != want:
			out = append(out, fmt.Sprintf("error.%s: %v, want %v", k, got, want))
		}
	}
	if _, ok := e["message"].(string); !ok {
		out = append(out, "error.message: missing")
	}
	if len(out) > 0 {
		out = append(out, "  (answer: "+shorten(mustJSON(answer))+")")
	}
	return out
}

func checkTreeAfter(dir string, c map[string]any) []string {
	var out []string
	entries, _ := c["tree_after"].([]any)
	for _, raw := range entries {
		e := raw.(map[string]any)
		rel := e["path"].(string)
		p := filepath.Join(dir, rel)
		fail := func(f string, a ...any) {
			out = append(out, fmt.Sprintf("tree_after %q: %s", rel, fmt.Sprintf(f, a...)))
		}
		fi, err := os.Lstat(p)
		if e["absent"] == true {
			if err == nil {
				fail("must not exist, found %v", fi.Mode().Type())
			}
			continue
		}
		if err != nil {
			fail("missing (%v)", err)
			continue
		}
		var want []byte
		hasWant := false
		if s, ok := str(e, "file"); ok {
			want, hasWant = []byte(s), true
		} else if s, ok := str(e, "file_base64"); ok {
			want, _ = base64.StdEncoding.DecodeString(s)
			hasWant = true
		}
		switch {
		case hasWant:
			if !fi.Mode().IsRegular() {
				fail("must be a regular file, found %v", fi.Mode().Type())
			} else if got, _ := os.ReadFile(p); string(got) != string(want) {
				fail("content %q, want %q", got, want)
			}
		case e["dir"] == true:
			if !fi.IsDir() {
				fail("must be a directory, found %v", fi.Mode().Type())
			} else if wantNames, ok := e["entries"].([]any); ok {
				des, _ := os.ReadDir(p)
				var got, w []string
				for _, d := range des {
					got = append(got, d.Name())
				}
				for _, n := range wantNames {
					w = append(w, n.(string))
				}
				sort.Strings(got)
				sort.Strings(w)
				if strings.Join(got, "\x00") != strings.Join(w, "\x00") {
					fail("entries %q, want %q", got, w)
				}
			}
		default:
			if s, ok := str(e, "symlink"); ok {
				want := strings.ReplaceAll(s, "{case_dir}", dir)
				if got, err := os.Readlink(p); err != nil {
					fail("must be a symlink, found %v", fi.Mode().Type())
				} else if got != want {
					fail("symlink to %q, want %q", got, want)
				}
			} else if other, ok := str(e, "hardlink"); ok {
				o, err := os.Lstat(filepath.Join(dir, other))
				a, b := fi.Sys().(*syscall.Stat_t), (*syscall.Stat_t)(nil)
				if err == nil {
					b = o.Sys().(*syscall.Stat_t)
				}
				if b == nil || a.Ino != b.Ino || a.Dev != b.Dev {
					fail("must be the same file as %q", other)
				}
			}
		}
		if m, ok := str(e, "mode"); ok {
			want, _ := strconv.ParseUint(m, 8, 32)
			if got := uint64(fi.Sys().(*syscall.Stat_t).Mode & 0o7777); got != want {
				fail("mode %04o, want %s", got, m)
			}
		}
	}
	return out
}
