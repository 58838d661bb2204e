package sandgate

/*
#include <stdint.h>
#include "sandgate.h"

// The exported Go audit callback (audit.go), set on a fetcher with the
// cgo.Handle as user data (no Go-side uintptr -> pointer conversion).
extern void sandgateGoAudit(void *user, struct sg_audit_event *event);
static sg_status sandgate_fetcher_set_audit(const sg_fetcher *f, uintptr_t handle, sg_error **err) {
	return sg_fetcher_set_audit(f, (sg_audit_fn)sandgateGoAudit, (void *)handle, err);
}
*/
import "C"

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"runtime"
	"runtime/cgo"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"
)

// Fetcher is the confined web fetch a policy grants (docs/reference/policy.md): its [net]
// section and [budgets] net_ops. The library authorizes the first request
// and every redirect hop, resolves names itself and pins each connection
// to the checked addresses; it never uses a proxy (in restricted mode a
// proxy set in the environment, such as HTTPS_PROXY, refuses every fetch).
// Fetch may be called from several goroutines at once.
type Fetcher struct {
	calls inflight
	ptr   *C.sg_fetcher // set once; freed by the last to leave calls
	audit cgo.Handle
	sink  *auditSink
}

// FetcherOption configures a Fetcher (NewFetcher).
type FetcherOption func(*fetcherConfig)

type fetcherConfig struct {
	audit func(AuditEvent)
}

// WithFetchAudit sets the fetcher's audit sink, called synchronously once
// per Fetch (refused ones too: a host not granted, a URL that does not
// parse, a redirect refused, the net_ops budget spent, a timeout) on the
// goroutine that ran it, after the fetch ended: Op "fetch", Path the
// origin (scheme://host:port) of every hop taken, " -> " between them
// ("" for a URL that does not parse), Size the bytes of body returned.
// Never the URL's user, password, path or query, nor a header or body. A
// Fetch refused by the binding before the library sees it (a negative
// Timeout or MaxBytes, a ctx already done, text that is not UTF-8) is
// reported too, with an empty Path. It may call back into the same
// fetcher, Close included: Close from the callback refuses later calls at
// once, and the fetcher is freed when the Fetch the callback runs in
// returns. A panic in it is recovered (it must not unwind through the
// library) and kept for AuditErrors.
func WithFetchAudit(f func(AuditEvent)) FetcherOption {
	return func(c *fetcherConfig) { c.audit = f }
}

// NewFetcher is the fetcher p grants, configured by opts (e.g.
// WithFetchAudit). A policy without [net] grants no destination: every
// fetch is refused with E_NET_DENIED.
func NewFetcher(p *Policy, opts ...FetcherOption) (*Fetcher, error) {
	var c fetcherConfig
	for _, opt := range opts {
		opt(&c)
	}
	var out *C.sg_fetcher
	err := p.with(func(pp *C.sg_policy) error {
		var e *C.sg_error
		if st := C.sg_fetcher_new(pp, &out, &e); st != C.SG_OK {
			return takeError(st, e)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	f := &Fetcher{ptr: out, sink: newAuditSink(c.audit)}
	if f.sink != nil {
		f.audit = cgo.NewHandle(f.sink)
		var e *C.sg_error
		if st := C.sandgate_fetcher_set_audit(out, C.uintptr_t(f.audit), &e); st != C.SG_OK {
			C.sg_fetcher_free(out)
			f.audit.Delete()
			return nil, takeError(st, e)
		}
	}
	runtime.SetFinalizer(f, (*Fetcher).Close)
	return f, nil
}

// AuditErrors answers the panics the audit callback raised, recovered
// and kept (the last 100, oldest first), after Close too; nil without a
// callback.
func (f *Fetcher) AuditErrors() []error {
	if f == nil {
		return nil
	}
	return f.sink.kept()
}

// Close closes the fetcher: every later call answers E_CLOSED. It does
// not wait: fetches already running run to their end (their timeout at
// the latest), and the fetcher is freed when the last of them returns, at
// once when none runs. So it may be called from an audit callback, or
// while another goroutine's Fetch runs. Closing twice is fine.
func (f *Fetcher) Close() error {
	if f == nil || f.ptr == nil || !f.calls.close() {
		return nil
	}
	runtime.SetFinalizer(f, nil)
	f.leave()
	return nil
}

// leave counts a call (or Close) out, freeing the fetcher when it was the
// last one out after Close.
func (f *Fetcher) leave() {
	if f.calls.leave() {
		f.free()
	}
}

func (f *Fetcher) free() {
	C.sg_fetcher_free(f.ptr)
	if f.audit != 0 {
		f.audit.Delete()
	}
}

// refused reports a Fetch the binding refused before the library saw it
// to the audit sink, with an empty Path, and answers err.
func (f *Fetcher) refused(err *FetchError) *FetchError {
	if f != nil && f.sink != nil && f.ptr != nil && !f.calls.closed() {
		f.sink.call(AuditEvent{Op: "fetch", Outcome: err.Err.Code, Time: time.Now()})
	}
	return err
}

// FetchOptions are the per-fetch settings. The zero value is a GET with
// the library's defaults.
type FetchOptions struct {
	// Method is the HTTP method; "" means GET. CONNECT is refused.
	Method string
	// Header holds the request headers. Names are canonicalized (as
	// net/http does) and several values of one name are sent as one field
	// joined with ", ". Host, Content-Length, Transfer-Encoding and
	// Connection belong to the client and are refused (E_REQUEST); when a
	// redirect changes origin, every header but Accept, Accept-Encoding,
	// Accept-Language, Cache-Control, Content-Language, Content-Type,
	// Pragma and User-Agent is dropped (a credential can ride in any
	// header).
	Header http.Header
	// Body is the request body; nil sends none.
	Body []byte
	// Timeout is the total time for resolution, connection, TLS, every
	// redirect hop and the body. 0 means the library's default (30 s);
	// the library caps it (5 min). Rounded up to whole milliseconds;
	// negative is refused (E_REQUEST). A deadline on ctx that comes
	// sooner replaces it.
	Timeout time.Duration
	// MaxBytes caps the body read; one byte more marks the response
	// Truncated. 0 means the library's default (10 MiB), which is also
	// the most it allows; negative is refused (E_REQUEST).
	MaxBytes int64
}

// Hop is one request of a fetch: the first, then one per redirect
// followed (or refused).
type Hop struct {
	URL       string   // host as written, fragment dropped
	Method    string   // the method sent (or that would have been)
	Addresses []string // the checked addresses dialled; empty when refused before resolving
	Status    int      // the status the hop answered; 0 when none came back
	Allowed   bool     // whether the network authorizer admitted the hop
	Reason    string   // the authorizer's reason
	Rule      string   // the net.allow entry that matched; "" when none
}

// FetchResponse is the final response of a fetch that got one, whatever
// its HTTP status.
type FetchResponse struct {
	// Status is the final HTTP status (a 3xx only when it had no Location).
	Status int
	// Header holds the final response's headers, names canonicalized.
	// Each name has exactly one value: the library joins repeated fields
	// with ", " (Set-Cookie included).
	Header http.Header
	// Body is the body read, at most the fetch's MaxBytes.
	Body []byte
	// Truncated reports that the body was longer than MaxBytes.
	Truncated bool
	// Hops lists every request made, the last being the final one.
	Hops []Hop
}

// FetchError is every error Fetch returns. Err holds the error code
// and message, so errors.Is(err, ErrNetDenied) and errors.As(err, &e)
// with e a *Error work through it. Hops are the requests made or refused
// (the last is the one that failed; empty for a malformed request, a
// spent budget, or an error made in Go), Rule the net.allow entry that
// matched, when one did.
//
// A fetch not started because ctx was already done has code E_ABORTED and
// also matches ctx.Err() (context.Canceled or context.DeadlineExceeded)
// with errors.Is; one whose ctx deadline ran out during the call has code
// E_TIMEOUT and matches context.DeadlineExceeded.
type FetchError struct {
	Err  *Error
	Rule string
	Hops []Hop

	ctx error // the context's error behind it, if any
}

func (e *FetchError) Error() string { return e.Err.Error() }

// Unwrap yields Err and, when the context ended the fetch, ctx.Err().
func (e *FetchError) Unwrap() []error {
	if e.ctx != nil {
		return []error{e.Err, e.ctx}
	}
	return []error{e.Err}
}

// The JSON of sg_fetcher_fetch: the request, and the answer in the shape
// of `sandgate tool`'s fetch op.
type fetchRequest struct {
	URL        string            `json:"url"`
	Method     string            `json:"method,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	Body       *string           `json:"body,omitempty"`
	BodyBase64 *string           `json:"body_base64,omitempty"`
	TimeoutMS  uint64            `json:"timeout_ms,omitempty"`
	MaxBytes   uint64            `json:"max_bytes,omitempty"`
}

type hopJSON struct {
	URL       string   `json:"url"`
	Method    string   `json:"method"`
	Addresses []string `json:"addresses"`
	Status    *int     `json:"status"`
	Allowed   bool     `json:"allowed"`
	Reason    string   `json:"reason"`
	Rule      *string  `json:"rule"`
}

type fetchAnswer struct {
	OK         bool              `json:"ok"`
	Status     int               `json:"status"`
	Headers    map[string]string `json:"headers"`
	Body       *string           `json:"body"`
	BodyBase64 *string           `json:"body_base64"`
	Truncated  bool              `json:"truncated"`
	Hops       []hopJSON         `json:"hops"`
	Error      *struct {
		Code    Code      `json:"code"`
		Message string    `json:"message"`
		Path    string    `json:"path"`
		Pattern string    `json:"pattern"`
		Key     string    `json:"key"`
		Rule    string    `json:"rule"`
		Hops    []hopJSON `json:"hops"`
	} `json:"error"`
}

func hops(js []hopJSON) []Hop {
	if js == nil {
		return nil
	}
	out := make([]Hop, len(js))
	for i, h := range js {
		out[i] = Hop{URL: h.URL, Method: h.Method, Addresses: h.Addresses, Allowed: h.Allowed, Reason: h.Reason}
		if out[i].Addresses == nil {
			out[i].Addresses = []string{}
		}
		if h.Status != nil {
			out[i].Status = *h.Status
		}
		if h.Rule != nil {
			out[i].Rule = *h.Rule
		}
	}
	return out
}

func fetchErr(e *Error) *FetchError { return &FetchError{Err: e} }

// call runs sg_fetcher_fetch_cancellable with abort (nil: none), counted
// in flight: the answer's bytes and, unless the status is SG_OK, the error
// (both freed here).
func (f *Fetcher) call(req []byte, abort *C.sg_abort) ([]byte, *Error) {
	if f == nil {
		return nil, requestError("fetcher is nil")
	}
	if f.ptr == nil { // a zero Fetcher, never built
		return nil, closedError("fetcher")
	}
	ok, free := f.calls.enter()
	if free {
		f.free()
	}
	if !ok {
		return nil, closedError("fetcher")
	}
	defer f.leave()
	var answer C.sg_bytes
	var e *C.sg_error
	r, rn := cbytes(req)
	st := C.sg_fetcher_fetch_cancellable(f.ptr, (*C.char)(unsafe.Pointer(r)), rn, abort, &answer, &e)
	raw := takeBytes(&answer)
	if st != C.SG_OK {
		return raw, takeError(st, e)
	}
	if e != nil {
		C.sg_error_free(e)
	}
	return raw, nil
}

// Fetch fetches url as the policy grants: the request and every redirect
// hop are authorized (E_NET_DENIED names the refused hop in Hops), the
// net_ops budget is spent once per fetch (E_DENIED when spent; a refused
// fetch spends it too). A response of any HTTP status is a result; an
// error is always a *FetchError.
//
// A ctx already done answers E_ABORTED without spending budget. A ctx
// cancelled during the call ends it within about 50 ms, its connection
// closed, with E_ABORTED (also matching ctx.Err()). A deadline on ctx is
// passed down as the fetch's timeout when it comes sooner than
// opts.Timeout, and a fetch it ends has code E_TIMEOUT (also matching
// context.DeadlineExceeded).
func (f *Fetcher) Fetch(ctx context.Context, url string, opts FetchOptions) (*FetchResponse, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if opts.Timeout < 0 {
		return nil, f.refused(fetchErr(requestError("timeout must not be negative")))
	}
	if opts.MaxBytes < 0 {
		return nil, f.refused(fetchErr(requestError("max_bytes must not be negative")))
	}
	if err := ctx.Err(); err != nil {
		return nil, f.refused(&FetchError{Err: &Error{Code: CodeAborted, Message: "the context was done before the fetch started: " + err.Error()}, ctx: err})
	}
	timeout := opts.Timeout
	deadline, hasDeadline := ctx.Deadline()
	byCtx := false
	if hasDeadline {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, f.refused(&FetchError{Err: &Error{Code: CodeAborted, Message: "the context was done before the fetch started: " + context.DeadlineExceeded.Error()}, ctx: context.DeadlineExceeded})
		}
		if timeout == 0 || left < timeout {
			timeout, byCtx = left, true
		}
	}
	if !utf8.ValidString(url) || !utf8.ValidString(opts.Method) {
		return nil, f.refused(fetchErr(requestError("the URL and the method must be valid UTF-8")))
	}
	req := fetchRequest{URL: url, Method: opts.Method, MaxBytes: uint64(opts.MaxBytes)}
	if timeout > 0 {
		req.TimeoutMS = ceilMillis(timeout)
	}
	if len(opts.Header) > 0 {
		names := make([]string, 0, len(opts.Header))
		for k := range opts.Header {
			names = append(names, k)
		}
		sort.Strings(names)
		req.Headers = make(map[string]string, len(names))
		for _, k := range names {
			vs := opts.Header[k]
			if len(vs) == 0 {
				continue
			}
			ck := http.CanonicalHeaderKey(k)
			v := strings.Join(vs, ", ")
			if !utf8.ValidString(ck) || !utf8.ValidString(v) {
				return nil, f.refused(fetchErr(requestError("the header " + strconv.Quote(k) + " is not valid UTF-8")))
			}
			if prev, ok := req.Headers[ck]; ok {
				v = prev + ", " + v
			}
			req.Headers[ck] = v
		}
	}
	if opts.Body != nil {
		if utf8.Valid(opts.Body) {
			s := string(opts.Body)
			req.Body = &s
		} else {
			s := base64.StdEncoding.EncodeToString(opts.Body)
			req.BodyBase64 = &s
		}
	}
	reqJSON, err := json.Marshal(req)
	if err != nil {
		return nil, f.refused(fetchErr(requestError("fetch request: " + err.Error())))
	}

	abort, release, aerr := abortOn(ctx)
	if aerr != nil {
		return nil, f.refused(fetchErr(asError(aerr)))
	}
	raw, cerr := f.call(reqJSON, abort)
	release()
	if cerr != nil && cerr.Code == CodeClosed && raw == nil {
		return nil, fetchErr(cerr)
	}

	var a fetchAnswer
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &a); err != nil {
			if cerr == nil {
				cerr = &Error{Code: CodeInternal, Message: "fetch answer: " + err.Error()}
			}
		}
	}
	if cerr == nil && !a.OK {
		cerr = &Error{Code: CodeInternal, Message: "fetch answered SG_OK without an ok answer"}
	}
	if cerr != nil {
		fe := &FetchError{Err: cerr}
		if ae := a.Error; ae != nil {
			if cerr.Path == "" {
				cerr.Path = ae.Path
			}
			if cerr.Pattern == "" {
				cerr.Pattern = ae.Pattern
			}
			if cerr.Key == "" {
				cerr.Key = ae.Key
			}
			if cerr.Message == "" {
				cerr.Message = ae.Message
			}
			fe.Rule = ae.Rule
			fe.Hops = hops(ae.Hops)
		}
		// The timeout sent was rounded up from the time left, so a timeout
		// it caused ends at or after the deadline.
		if byCtx && cerr.Code == CodeTimeout && !time.Now().Before(deadline) {
			fe.ctx = context.DeadlineExceeded
		}
		if cerr.Code == CodeAborted {
			switch err := ctx.Err(); {
			case errors.Is(err, context.DeadlineExceeded):
				// The deadline's watcher can end the fetch a moment before
				// the timeout sent with it: the deadline ran out either way.
				cerr.Code = CodeTimeout
				cerr.Message = "the context's deadline ran out during the fetch"
				fe.ctx = context.DeadlineExceeded
			case err != nil:
				fe.ctx = err
			}
		}
		return nil, fe
	}
	res := &FetchResponse{
		Status:    a.Status,
		Header:    make(http.Header, len(a.Headers)),
		Truncated: a.Truncated,
		Hops:      hops(a.Hops),
		Body:      []byte{},
	}
	for k, v := range a.Headers {
		res.Header[http.CanonicalHeaderKey(k)] = []string{v}
	}
	switch {
	case a.Body != nil:
		res.Body = []byte(*a.Body)
	case a.BodyBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*a.BodyBase64)
		if err != nil {
			return nil, fetchErr(&Error{Code: CodeInternal, Message: "fetch answer: body_base64: " + err.Error()})
		}
		res.Body = b
	}
	if res.Hops == nil {
		res.Hops = []Hop{}
	}
	return res, nil
}
