package sandgate

/*
#include <stdint.h>
#include "sandgate.h"

// The exported Go audit callback (audit.go), and a setter that passes the
// cgo.Handle as user data without a Go-side uintptr -> pointer conversion.
extern void sandgateGoAudit(void *user, struct sg_audit_event *event);
static sg_status sandgate_set_audit(sg_sandbox_options *o, uintptr_t handle, sg_error **err) {
	return sg_sandbox_options_set_audit(o, (sg_audit_fn)sandgateGoAudit, (void *)handle, err);
}
*/
import "C"

import (
	"context"
	"encoding/json"
	"runtime"
	"runtime/cgo"
	"unicode/utf8"
)

// MaxRangeLines is the most lines one ranged read serves (docs/reference/sandbox.md).
const MaxRangeLines = 2000

// DefaultMaxResults is grep's result cap when none is given.
const DefaultMaxResults = 100

// Option configures a Sandbox.
type Option func(*config)

type config struct {
	steps []func(o *C.sg_sandbox_options, e **C.sg_error) C.sg_status
	audit func(AuditEvent)
}

func (c *config) add(f func(o *C.sg_sandbox_options, e **C.sg_error) C.sg_status) {
	c.steps = append(c.steps, f)
}

// WithReadRoots adds read roots (host directories), looked up in order.
func WithReadRoots(dirs ...string) Option {
	return func(c *config) {
		for _, d := range dirs {
			c.add(func(o *C.sg_sandbox_options, e **C.sg_error) C.sg_status {
				p, n := cstr(d)
				return C.sg_sandbox_options_add_read_root(o, p, n, e)
			})
		}
	}
}

// WithWriteRoot sets the write root (a host directory).
func WithWriteRoot(dir string) Option {
	return func(c *config) {
		c.add(func(o *C.sg_sandbox_options, e **C.sg_error) C.sg_status {
			p, n := cstr(dir)
			return C.sg_sandbox_options_set_write_root(o, p, n, e)
		})
	}
}

// WithMaxReadBytes sets the read cap (default 10 MiB).
func WithMaxReadBytes(n uint64) Option {
	return func(c *config) {
		c.add(func(o *C.sg_sandbox_options, e **C.sg_error) C.sg_status {
			return C.sg_sandbox_options_set_max_read_bytes(o, C.uint64_t(n), e)
		})
	}
}

// WithMaxWriteBytes sets the write cap (default 5 MiB).
func WithMaxWriteBytes(n uint64) Option {
	return func(c *config) {
		c.add(func(o *C.sg_sandbox_options, e **C.sg_error) C.sg_status {
			return C.sg_sandbox_options_set_max_write_bytes(o, C.uint64_t(n), e)
		})
	}
}

// WithAllowOverwrite is the host's half of the overwrite rule.
func WithAllowOverwrite(on bool) Option {
	return func(c *config) {
		c.add(func(o *C.sg_sandbox_options, e **C.sg_error) C.sg_status {
			return C.sg_sandbox_options_set_allow_overwrite(o, C.bool(on), e)
		})
	}
}

// WithDenyWrite adds deny-write patterns (docs/reference/deny-write.md).
func WithDenyWrite(patterns ...string) Option {
	return func(c *config) {
		for _, pat := range patterns {
			c.add(func(o *C.sg_sandbox_options, e **C.sg_error) C.sg_status {
				p, n := cstr(pat)
				return C.sg_sandbox_options_add_deny_write(o, p, n, e)
			})
		}
	}
}

// WithRestricted turns restricted mode on or off (.git protected, hard
// links refused).
func WithRestricted(on bool) Option {
	return func(c *config) {
		c.add(func(o *C.sg_sandbox_options, e **C.sg_error) C.sg_status {
			return C.sg_sandbox_options_set_restricted(o, C.bool(on), e)
		})
	}
}

// WithResolver chooses the resolver of the sandbox's roots.
func WithResolver(r Resolver) Option {
	return func(c *config) {
		c.add(func(o *C.sg_sandbox_options, e **C.sg_error) C.sg_status {
			return C.sg_sandbox_options_set_resolver(o, C.sg_resolver(r), e)
		})
	}
}

// WithFSOpsBudget limits the number of file operations (refused ones count).
func WithFSOpsBudget(n uint64) Option {
	return func(c *config) {
		c.add(func(o *C.sg_sandbox_options, e **C.sg_error) C.sg_status {
			return C.sg_sandbox_options_set_fs_ops_budget(o, C.uint64_t(n), e)
		})
	}
}

// WithAudit sets the audit sink, called synchronously after every
// operation (refused ones too) on the goroutine that ran it. It may call
// back into the same sandbox, Close included: Close from the callback
// refuses later calls at once, and the sandbox is freed when the call the
// callback runs in returns. A panic in it is recovered (it must not unwind
// through the library) and kept for AuditErrors.
func WithAudit(f func(AuditEvent)) Option {
	return func(c *config) { c.audit = f }
}

// Sandbox is the agent-facing sandbox (docs/reference/sandbox.md): names are root-relative
// and checked (docs/reference/names.md), nothing is granted unless configured. It is safe
// for concurrent use. Errors are *Error.
type Sandbox struct {
	calls inflight
	ptr   *C.sg_sandbox // set once; freed by the last to leave calls
	audit cgo.Handle
	sink  *auditSink
}

// NewSandbox builds a sandbox that grants only what opts grant.
func NewSandbox(opts ...Option) (*Sandbox, error) {
	return build(C.sg_sandbox_options_new(), opts)
}

// SandboxFromPolicy builds the sandbox a policy grants (roots, caps,
// overwrite switch, deny patterns, restricted mode, fs_ops budget), then
// applies opts (e.g. WithAudit) on top.
func SandboxFromPolicy(p *Policy, opts ...Option) (*Sandbox, error) {
	var o *C.sg_sandbox_options
	err := p.with(func(pp *C.sg_policy) error {
		var e *C.sg_error
		if st := C.sg_sandbox_options_from_policy(pp, &o, &e); st != C.SG_OK {
			return takeError(st, e)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return build(o, opts)
}

func build(o *C.sg_sandbox_options, opts []Option) (*Sandbox, error) {
	defer C.sg_sandbox_options_free(o)
	var c config
	for _, opt := range opts {
		opt(&c)
	}
	for _, step := range c.steps {
		var e *C.sg_error
		if st := step(o, &e); st != C.SG_OK {
			return nil, takeError(st, e)
		}
	}
	s := &Sandbox{sink: newAuditSink(c.audit)}
	if s.sink != nil {
		s.audit = cgo.NewHandle(s.sink)
		var e *C.sg_error
		if st := C.sandgate_set_audit(o, C.uintptr_t(s.audit), &e); st != C.SG_OK {
			s.audit.Delete()
			return nil, takeError(st, e)
		}
	}
	var e *C.sg_error
	if st := C.sg_sandbox_new(o, &s.ptr, &e); st != C.SG_OK {
		if s.audit != 0 {
			s.audit.Delete()
		}
		return nil, takeError(st, e)
	}
	runtime.SetFinalizer(s, (*Sandbox).Close)
	return s, nil
}

// AuditErrors answers the panics the audit callback raised, recovered
// and kept (the last 100, oldest first, each an error naming the panic's
// value and wrapping it when it is an error), after Close too; nil
// without a callback.
func (s *Sandbox) AuditErrors() []error {
	if s == nil {
		return nil
	}
	return s.sink.kept()
}

// Close closes the sandbox: every later call answers E_CLOSED. It does not
// wait: calls in progress finish (an operation already past its closed
// check completes), and the sandbox is freed when the last of them
// returns, at once when none is in progress. So it may be called from an
// audit callback, or while another goroutine's call runs. Closing twice is
// fine.
func (s *Sandbox) Close() error {
	if s == nil || s.ptr == nil || !s.calls.close() {
		return nil
	}
	runtime.SetFinalizer(s, nil)
	var e *C.sg_error
	st := C.sg_sandbox_close(s.ptr, &e)
	s.leave()
	if st != C.SG_OK {
		return takeError(st, e)
	}
	return nil
}

// leave counts a call (or Close) out, freeing the sandbox when it was the
// last one out after Close.
func (s *Sandbox) leave() {
	if s.calls.leave() {
		s.free()
	}
}

func (s *Sandbox) free() {
	C.sg_sandbox_free(s.ptr)
	if s.audit != 0 {
		s.audit.Delete()
	}
}

func (s *Sandbox) with(f func(p *C.sg_sandbox, e **C.sg_error) C.sg_status) error {
	if s == nil {
		return requestError("sandbox is nil")
	}
	if s.ptr == nil { // a zero Sandbox, never built
		return closedError("sandbox")
	}
	ok, free := s.calls.enter()
	if free {
		s.free()
	}
	if !ok {
		return closedError("sandbox")
	}
	defer s.leave()
	var e *C.sg_error
	if st := f(s.ptr, &e); st != C.SG_OK {
		return takeError(st, e)
	}
	return nil
}

func (s *Sandbox) bytesOp(f func(p *C.sg_sandbox, out *C.sg_bytes, e **C.sg_error) C.sg_status) ([]byte, error) {
	var out []byte
	err := s.with(func(p *C.sg_sandbox, e **C.sg_error) C.sg_status {
		var b C.sg_bytes
		st := f(p, &b, e)
		if st == C.SG_OK {
			out = takeBytes(&b)
		} else {
			C.sg_bytes_free(&b)
		}
		return st
	})
	return out, err
}

// Warnings are remarks about the configuration (e.g. a read root inside
// the write root).
func (s *Sandbox) Warnings() ([]string, error) {
	b, err := s.bytesOp(func(p *C.sg_sandbox, out *C.sg_bytes, e **C.sg_error) C.sg_status {
		return C.sg_sandbox_warnings(p, out, e)
	})
	if err != nil {
		return nil, err
	}
	var w []string
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, &Error{Code: CodeInternal, Message: "warnings: " + err.Error()}
	}
	return w, nil
}

// HostName is the root-relative name of a path the host holds (not one an
// agent gives), for the read-side operations: an absolute path inside a
// read root is compared with the root component by component, as the root
// was spelled and as its symlinks resolve, never by string prefix
// ("/srv/app-secrets" is not inside "/srv/app"). A relative name comes back
// as given. E_PATH_INVALID for a path holding a NUL byte (it names no
// file), E_PATH_ESCAPE for an absolute path outside every root, E_DENIED
// for one only in the write root when that is not a read root.
func (s *Sandbox) HostName(path string) (string, error) {
	return s.hostName(path, false)
}

// HostWriteName is HostName for the write-side operations: the path must
// lie in the write root (E_DENIED for one in a read-only root).
func (s *Sandbox) HostWriteName(path string) (string, error) {
	return s.hostName(path, true)
}

func (s *Sandbox) hostName(path string, write bool) (string, error) {
	b, err := s.bytesOp(func(p *C.sg_sandbox, out *C.sg_bytes, e **C.sg_error) C.sg_status {
		ps, pn := cstr(path)
		return C.sg_sandbox_host_name(p, ps, pn, C.bool(write), out, e)
	})
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// Read reads the whole file (at most the read cap, else E_TOO_LARGE).
func (s *Sandbox) Read(path string) ([]byte, error) {
	return s.bytesOp(func(p *C.sg_sandbox, out *C.sg_bytes, e **C.sg_error) C.sg_status {
		ps, pn := cstr(path)
		return C.sg_sandbox_read(p, ps, pn, out, e)
	})
}

// Lines is what a ranged read serves.
type Lines struct {
	Content    []byte // the lines, with their endings
	Offset     uint64 // the first line served (1-based)
	Lines      uint64 // how many lines were served
	TotalLines uint64 // lines in the whole file
	Truncated  bool   // the read cap cut the range short
}

// ReadLines reads limit lines from line offset (1-based). offset and limit
// must be at least 1 (E_REQUEST otherwise); limit is at most MaxRangeLines.
func (s *Sandbox) ReadLines(path string, offset, limit int) (*Lines, error) {
	return s.ReadLinesContext(context.Background(), path, offset, limit)
}

// ReadLinesContext is ReadLines, stopped with ErrAborted once ctx is done.
// A ranged read counts every line of the file, so its time grows with the
// file's data, not with the range.
func (s *Sandbox) ReadLinesContext(ctx context.Context, path string, offset, limit int) (*Lines, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if offset < 1 {
		return nil, requestError("offset must be at least 1")
	}
	if limit < 1 {
		return nil, requestError("limit must be at least 1")
	}
	abort, release, err := abortOn(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	var l Lines
	err = s.with(func(p *C.sg_sandbox, e **C.sg_error) C.sg_status {
		var b C.sg_bytes
		var info C.sg_lines
		ps, pn := cstr(path)
		st := C.sg_sandbox_read_lines_cancellable(p, ps, pn, C.uint64_t(offset), C.uint64_t(limit), abort, &b, &info, e)
		if st == C.SG_OK {
			l.Content = takeBytes(&b)
			l.Offset, l.Lines, l.TotalLines = uint64(info.offset), uint64(info.lines), uint64(info.total_lines)
			l.Truncated = bool(info.truncated)
		} else {
			C.sg_bytes_free(&b)
		}
		return st
	})
	if err != nil {
		return nil, err
	}
	return &l, nil
}

// Write writes data to path atomically: a new file, or a replacement when
// overwrite is true and the sandbox allows overwriting. It answers the
// bytes written.
func (s *Sandbox) Write(path string, data []byte, overwrite bool) (uint64, error) {
	var n C.uint64_t
	err := s.with(func(p *C.sg_sandbox, e **C.sg_error) C.sg_status {
		ps, pn := cstr(path)
		d, dn := cbytes(data)
		return C.sg_sandbox_write(p, ps, pn, d, dn, C.bool(overwrite), &n, e)
	})
	return uint64(n), err
}

// Edit replaces old with new in path: exactly one occurrence unless all.
// It answers how many replacements were made.
func (s *Sandbox) Edit(path, old, new string, all bool) (uint64, error) {
	var n C.uint64_t
	err := s.with(func(p *C.sg_sandbox, e **C.sg_error) C.sg_status {
		ps, pn := cstr(path)
		os, on := cstr(old)
		ns, nn := cstr(new)
		return C.sg_sandbox_edit(p, ps, pn, os, on, ns, nn, C.bool(all), &n, e)
	})
	return uint64(n), err
}

// Entry is one directory entry of List.
type Entry struct {
	Name string `json:"name"`
	Kind string `json:"kind"` // file, dir, symlink or other
	Size uint64 `json:"size"`
}

// List lists a directory, sorted by name.
func (s *Sandbox) List(path string) ([]Entry, error) {
	b, err := s.bytesOp(func(p *C.sg_sandbox, out *C.sg_bytes, e **C.sg_error) C.sg_status {
		ps, pn := cstr(path)
		return C.sg_sandbox_list(p, ps, pn, out, e)
	})
	if err != nil {
		return nil, err
	}
	entries := []Entry{}
	if err := json.Unmarshal(b, &entries); err != nil {
		return nil, &Error{Code: CodeInternal, Message: "list: " + err.Error()}
	}
	return entries, nil
}

// StatInfo is what Sandbox.Stat answers.
type StatInfo struct {
	Kind string // file, dir, symlink or other
	Mode uint32 // permission bits
	Size uint64
}

var kindNames = map[C.sg_kind]string{
	C.SG_KIND_FILE: "file", C.SG_KIND_DIR: "dir", C.SG_KIND_SYMLINK: "symlink", C.SG_KIND_OTHER: "other",
}

// Stat describes path (following a final symlink beneath the root).
func (s *Sandbox) Stat(path string) (StatInfo, error) {
	var st C.sg_stat
	err := s.with(func(p *C.sg_sandbox, e **C.sg_error) C.sg_status {
		ps, pn := cstr(path)
		return C.sg_sandbox_stat(p, ps, pn, &st, e)
	})
	if err != nil {
		return StatInfo{}, err
	}
	return StatInfo{Kind: kindNames[st.kind], Mode: uint32(st.mode), Size: uint64(st.size)}, nil
}

// Mkdir creates a directory and any missing parents beneath the write root.
func (s *Sandbox) Mkdir(path string) error {
	return s.with(func(p *C.sg_sandbox, e **C.sg_error) C.sg_status {
		ps, pn := cstr(path)
		return C.sg_sandbox_mkdir(p, ps, pn, e)
	})
}

// Delete deletes a file, a symlink (not its target) or an empty directory.
func (s *Sandbox) Delete(path string) error {
	return s.with(func(p *C.sg_sandbox, e **C.sg_error) C.sg_status {
		ps, pn := cstr(path)
		return C.sg_sandbox_delete(p, ps, pn, e)
	})
}

// Rename moves from to to beneath the write root; to must not exist.
func (s *Sandbox) Rename(from, to string) error {
	return s.with(func(p *C.sg_sandbox, e **C.sg_error) C.sg_status {
		fs, fn := cstr(from)
		ts, tn := cstr(to)
		return C.sg_sandbox_rename(p, fs, fn, ts, tn, e)
	})
}

// GlobContext is Glob, stopped with ErrAborted once ctx is done (a ctx
// already done stops it before the walk starts, spending no budget).
func (s *Sandbox) GlobContext(ctx context.Context, pattern, path string) ([]string, error) {
	paths, _, err := s.GlobFoundContext(ctx, pattern, path)
	return paths, err
}

// Glob answers the root-relative names matching pattern below path ("" for
// the root itself) in every read root. Symlinks are never followed.
func (s *Sandbox) Glob(pattern, path string) ([]string, error) {
	b, err := s.bytesOp(func(p *C.sg_sandbox, out *C.sg_bytes, e **C.sg_error) C.sg_status {
		ps, pn := cstr(pattern)
		dir, dn := cstr(path) // nil for ""
		return C.sg_sandbox_glob(p, ps, pn, dir, dn, out, e)
	})
	if err != nil {
		return nil, err
	}
	paths := []string{}
	if err := json.Unmarshal(b, &paths); err != nil {
		return nil, &Error{Code: CodeInternal, Message: "glob: " + err.Error()}
	}
	return paths, nil
}

// Cut says whether a search's answer was cut, and by which cap: Limit is
// "max_results" when more matched than the answer holds (an answer of
// exactly the cap is whole), "walk_entries" when the walk stopped at its
// 200,000 entries and what lies past them was not searched,
// "max_read_bytes" when a grep passed over a file larger than
// max_read_bytes without searching it, "path_length" when a directory
// whose path is 4,096 bytes or longer was not entered, "answer_bytes"
// when a grep's matches and their context lines, each with its path,
// reached max_read_bytes, "" when the answer is whole.
// Unreadable counts the subdirectories the walk could not list and the
// entries whose names are not UTF-8 (and, for grep, the files it could
// not open or read to the end), and so passed over. Binary counts the files grep passed over unsearched as binary (a
// NUL in their first 8 KiB); always 0 for glob.
type Cut struct {
	Truncated  bool   `json:"truncated"`
	Limit      string `json:"limit"`
	Unreadable int    `json:"unreadable,omitempty"`
	Binary     int    `json:"binary,omitempty"`
}

// GlobFound is Glob, also saying whether the answer was cut at its 1,000
// paths or at the walk's cap. A cut answer holds the first paths the walk
// met (each directory's entries in name order, then its subdirectories),
// sorted by name.
func (s *Sandbox) GlobFound(pattern, path string) ([]string, Cut, error) {
	return s.GlobFoundContext(context.Background(), pattern, path)
}

// GlobFoundContext is GlobFound, stopped with ErrAborted once ctx is done
// (a ctx already done stops it before the walk starts, spending no
// budget).
func (s *Sandbox) GlobFoundContext(ctx context.Context, pattern, path string) ([]string, Cut, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	abort, release, err := abortOn(ctx)
	if err != nil {
		return nil, Cut{}, err
	}
	defer release()
	b, err := s.bytesOp(func(p *C.sg_sandbox, out *C.sg_bytes, e **C.sg_error) C.sg_status {
		ps, pn := cstr(pattern)
		dir, dn := cstr(path) // nil for ""
		return C.sg_sandbox_glob_found_cancellable(p, ps, pn, dir, dn, abort, out, e)
	})
	if err != nil {
		return nil, Cut{}, err
	}
	var answer struct {
		Paths []string `json:"paths"`
		Cut
	}
	if err := json.Unmarshal(b, &answer); err != nil {
		return nil, Cut{}, &Error{Code: CodeInternal, Message: "glob: " + err.Error()}
	}
	if answer.Paths == nil {
		answer.Paths = []string{}
	}
	return answer.Paths, answer.Cut, nil
}

// Match is one line Grep found, with the context lines GrepContext asked
// for (Before oldest first). Text and each context line hold at most
// 1,000 bytes of their line: LineTruncated says Text is not the whole
// line, BeforeTruncated and AfterTruncated the indices (into Before and
// After) of the context lines cut at 1,000 bytes. Text is the line's
// start, unless the line's first match ends past its first 1,000 bytes:
// then Text starts shortly before the match, TextStart bytes into the
// line.
type Match struct {
	Path            string   `json:"path"`
	Line            uint64   `json:"line"`
	Text            string   `json:"text"`
	TextStart       int      `json:"text_start,omitempty"`
	Before          []string `json:"before,omitempty"`
	After           []string `json:"after,omitempty"`
	LineTruncated   bool     `json:"line_truncated,omitempty"`
	BeforeTruncated []int    `json:"before_truncated,omitempty"`
	AfterTruncated  []int    `json:"after_truncated,omitempty"`
}

// FileCount is how many lines match in one file (GrepCount).
type FileCount struct {
	Path  string `json:"path"`
	Count uint64 `json:"count"`
}

// GrepOption refines Grep, GrepFiles and GrepCount.
type GrepOption func(*grepConfig)

type grepConfig struct {
	path    string
	max     int
	set     bool
	glob    string
	fold    bool
	before  int
	after   int
	ignore  bool
	context bool
	report  *Cut
	ctx     context.Context
}

// GrepIn searches below path instead of the whole root.
func GrepIn(path string) GrepOption { return func(g *grepConfig) { g.path = path } }

// GrepMaxResults caps the results (default DefaultMaxResults); n must be
// at least 1 (E_REQUEST otherwise).
func GrepMaxResults(n int) GrepOption { return func(g *grepConfig) { g.max, g.set = n, true } }

// GrepGlob searches only files matching glob: a glob without "/" is
// matched against the file's name ("*.go"), one with "/" against its path
// below the search base ("cmd/**/*.go"). A glob that is not valid UTF-8 is
// E_REQUEST.
func GrepGlob(glob string) GrepOption { return func(g *grepConfig) { g.glob = glob } }

// GrepCaseInsensitive matches letters in either case.
func GrepCaseInsensitive() GrepOption { return func(g *grepConfig) { g.fold = true } }

// GrepContext answers up to before lines before and after lines after each
// match (Grep only; GrepFiles and GrepCount refuse it).
func GrepContext(before, after int) GrepOption {
	return func(g *grepConfig) { g.before, g.after, g.context = before, after, true }
}

// GrepGitignore skips what .gitignore and .ignore files inside the root
// exclude, and the .git directory.
func GrepGitignore() GrepOption { return func(g *grepConfig) { g.ignore = true } }

// GrepReport has Grep, GrepFiles or GrepCount set *cut to whether their
// answer was cut, and by which cap.
func GrepReport(cut *Cut) GrepOption { return func(g *grepConfig) { g.report = cut } }

// GrepAbortOn stops the search with ErrAborted once ctx is done: the walk
// looks between entries, the search every 4,096 lines of a file. A ctx
// already done stops it before the walk starts, spending no budget.
func GrepAbortOn(ctx context.Context) GrepOption { return func(g *grepConfig) { g.ctx = ctx } }

// grep runs sg_sandbox_grep_found in mode and decodes its results into
// into.
func (s *Sandbox) grep(pattern, mode string, opts []GrepOption, into any) error {
	var g grepConfig
	for _, o := range opts {
		o(&g)
	}
	o := map[string]any{}
	if g.set {
		if g.max < 1 {
			return requestError("max_results must be at least 1")
		}
		o["max_results"] = g.max
	}
	if g.context {
		if g.before < 0 || g.after < 0 {
			return requestError("context line counts must not be negative")
		}
		if g.before > 0 {
			o["before"] = g.before
		}
		if g.after > 0 {
			o["after"] = g.after
		}
	}
	if g.glob != "" {
		if !utf8.ValidString(g.glob) {
			// JSON would send each invalid byte as U+FFFD.
			return requestError("glob is not valid UTF-8")
		}
		o["glob"] = g.glob
	}
	if g.fold {
		o["case_insensitive"] = true
	}
	if g.ignore {
		o["gitignore"] = true
	}
	if mode != "lines" {
		o["mode"] = mode
	}
	js, err := json.Marshal(o)
	if err != nil {
		return &Error{Code: CodeInternal, Message: "grep: " + err.Error()}
	}
	ctx := g.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	abort, release, err := abortOn(ctx)
	if err != nil {
		return err
	}
	defer release()
	b, err := s.bytesOp(func(p *C.sg_sandbox, out *C.sg_bytes, e **C.sg_error) C.sg_status {
		ps, pn := cstr(pattern)
		var dir *C.char
		var dn C.size_t
		if g.path != "" {
			dir, dn = cstr(g.path)
		}
		jp, jn := cstr(string(js))
		return C.sg_sandbox_grep_found_cancellable(p, ps, pn, dir, dn, jp, jn, abort, out, e)
	})
	if err != nil {
		return err
	}
	var answer struct {
		Matches json.RawMessage `json:"matches"`
		Files   json.RawMessage `json:"files"`
		Counts  json.RawMessage `json:"counts"`
		Cut
	}
	if err := json.Unmarshal(b, &answer); err != nil {
		return &Error{Code: CodeInternal, Message: "grep: " + err.Error()}
	}
	results := map[string]json.RawMessage{"lines": answer.Matches, "files": answer.Files, "count": answer.Counts}[mode]
	if err := json.Unmarshal(results, into); err != nil {
		return &Error{Code: CodeInternal, Message: "grep: " + err.Error()}
	}
	if g.report != nil {
		*g.report = answer.Cut
	}
	return nil
}

// Grep answers the lines matching the regular expression pattern.
func (s *Sandbox) Grep(pattern string, opts ...GrepOption) ([]Match, error) {
	matches := []Match{}
	if err := s.grep(pattern, "lines", opts, &matches); err != nil {
		return nil, err
	}
	return matches, nil
}

// GrepFiles answers the paths of the files with a line matching pattern,
// in walk order.
func (s *Sandbox) GrepFiles(pattern string, opts ...GrepOption) ([]string, error) {
	files := []string{}
	if err := s.grep(pattern, "files", opts, &files); err != nil {
		return nil, err
	}
	return files, nil
}

// GrepCount answers, for each file with a line matching pattern, how many
// lines match.
func (s *Sandbox) GrepCount(pattern string, opts ...GrepOption) ([]FileCount, error) {
	counts := []FileCount{}
	if err := s.grep(pattern, "count", opts, &counts); err != nil {
		return nil, err
	}
	return counts, nil
}
