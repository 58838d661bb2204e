package sandgate

/*
#include "sandgate.h"
*/
import "C"

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
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
	mu  sync.RWMutex
	ptr *C.sg_fetcher
}

// NewFetcher is the fetcher p grants. A policy without [net] grants no
// destination: every fetch is refused with E_NET_DENIED.
func NewFetcher(p *Policy) (*Fetcher, error) {
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
	f := &Fetcher{ptr: out}
	runtime.SetFinalizer(f, (*Fetcher).Close)
	return f, nil
}

// Close frees the fetcher, waiting for fetches in progress (each ends by
// its timeout at the latest). Later calls answer E_CLOSED. Closing twice
// is fine.
func (f *Fetcher) Close() error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ptr != nil {
		C.sg_fetcher_free(f.ptr)
		f.ptr = nil
		runtime.SetFinalizer(f, nil)
	}
	return nil
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

// call runs sg_fetcher_fetch under the read lock: the answer's bytes and,
// unless the status is SG_OK, the error (both freed here).
func (f *Fetcher) call(req []byte) ([]byte, *Error) {
	if f == nil {
		return nil, requestError("fetcher is nil")
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.ptr == nil {
		return nil, closedError("fetcher")
	}
	var answer C.sg_bytes
	var e *C.sg_error
	r, rn := cbytes(req)
	st := C.sg_fetcher_fetch(f.ptr, (*C.char)(unsafe.Pointer(r)), rn, &answer, &e)
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
// ctx is checked before the call: a ctx already done answers E_ABORTED
// without spending budget. The library call itself cannot be cancelled:
// once started, a fetch runs until it completes or its timeout runs out.
// A deadline on ctx is passed down as the fetch's timeout when it comes
// sooner than opts.Timeout, so it bounds the call (E_TIMEOUT).
func (f *Fetcher) Fetch(ctx context.Context, url string, opts FetchOptions) (*FetchResponse, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if opts.Timeout < 0 {
		return nil, fetchErr(requestError("timeout must not be negative"))
	}
	if opts.MaxBytes < 0 {
		return nil, fetchErr(requestError("max_bytes must not be negative"))
	}
	if err := ctx.Err(); err != nil {
		return nil, &FetchError{Err: &Error{Code: CodeAborted, Message: "the context was done before the fetch started: " + err.Error()}, ctx: err}
	}
	timeout := opts.Timeout
	deadline, hasDeadline := ctx.Deadline()
	byCtx := false
	if hasDeadline {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, &FetchError{Err: &Error{Code: CodeAborted, Message: "the context was done before the fetch started: " + context.DeadlineExceeded.Error()}, ctx: context.DeadlineExceeded}
		}
		if timeout == 0 || left < timeout {
			timeout, byCtx = left, true
		}
	}
	if !utf8.ValidString(url) || !utf8.ValidString(opts.Method) {
		return nil, fetchErr(requestError("the URL and the method must be valid UTF-8"))
	}
	req := fetchRequest{URL: url, Method: opts.Method, MaxBytes: uint64(opts.MaxBytes)}
	if timeout > 0 {
		req.TimeoutMS = uint64((timeout + time.Millisecond - 1) / time.Millisecond)
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
				return nil, fetchErr(requestError("the header " + strconv.Quote(k) + " is not valid UTF-8"))
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
		return nil, fetchErr(requestError("fetch request: " + err.Error()))
	}

	raw, cerr := f.call(reqJSON)
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
