package sandgate

/*
#include "sandgate.h"
*/
import "C"

import (
	"encoding/json"
	"runtime"
	"strconv"
	"sync"
)

// Policy is a loaded, checked policy file (docs/reference/policy.md). Immutable and safe
// for concurrent use. Sandboxes and executors made from it outlive it.
type Policy struct {
	mu  sync.RWMutex
	ptr *C.sg_policy
}

// LoadPolicy loads and checks the policy file at path. A refusal is an
// *Error with code E_POLICY naming the key.
func LoadPolicy(path string) (*Policy, error) {
	var out *C.sg_policy
	var e *C.sg_error
	p, n := cstr(path)
	if st := C.sg_policy_load(p, n, &out, &e); st != C.SG_OK {
		return nil, takeError(st, e)
	}
	return newPolicy(out), nil
}

// ParsePolicy checks a policy from its bytes as if read from a file in
// baseDir (relative roots resolve against it). The digest covers exactly
// these bytes.
func ParsePolicy(text []byte, baseDir string) (*Policy, error) {
	var out *C.sg_policy
	var e *C.sg_error
	t, tn := cbytes(text)
	b, bn := cstr(baseDir)
	if st := C.sg_policy_parse(t, tn, b, bn, &out, &e); st != C.SG_OK {
		return nil, takeError(st, e)
	}
	return newPolicy(out), nil
}

func newPolicy(p *C.sg_policy) *Policy {
	pol := &Policy{ptr: p}
	runtime.SetFinalizer(pol, (*Policy).Close)
	return pol
}

// Close frees the policy. Closing twice is fine.
func (p *Policy) Close() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ptr != nil {
		C.sg_policy_free(p.ptr)
		p.ptr = nil
		runtime.SetFinalizer(p, nil)
	}
	return nil
}

func (p *Policy) with(f func(pp *C.sg_policy) error) error {
	if p == nil {
		return requestError("policy is nil")
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.ptr == nil {
		return closedError("policy")
	}
	return f(p.ptr)
}

func (p *Policy) bytesOp(f func(pp *C.sg_policy, out *C.sg_bytes, e **C.sg_error) C.sg_status) ([]byte, error) {
	var out []byte
	err := p.with(func(pp *C.sg_policy) error {
		var b C.sg_bytes
		var e *C.sg_error
		if st := f(pp, &b, &e); st != C.SG_OK {
			C.sg_bytes_free(&b)
			return takeError(st, e)
		}
		out = takeBytes(&b)
		return nil
	})
	return out, err
}

// Digest is "sha256:<64 hex digits>" of the policy file's bytes.
func (p *Policy) Digest() (string, error) {
	b, err := p.bytesOp(func(pp *C.sg_policy, out *C.sg_bytes, e **C.sg_error) C.sg_status {
		return C.sg_policy_digest(pp, out, e)
	})
	return string(b), err
}

// Summary is what the policy grants, decoded from the library's JSON:
// mode, read_roots, write_root, deny_write, limits, exec, net, budgets,
// digest. Numbers are float64 unless decoded with SummaryJSON.
func (p *Policy) Summary() (map[string]any, error) {
	b, err := p.SummaryJSON()
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, &Error{Code: CodeInternal, Message: "summary: " + err.Error()}
	}
	return m, nil
}

// SummaryJSON is the summary as the library's JSON bytes.
func (p *Policy) SummaryJSON() ([]byte, error) {
	return p.bytesOp(func(pp *C.sg_policy, out *C.sg_bytes, e **C.sg_error) C.sg_status {
		return C.sg_policy_summary(pp, false, out, e)
	})
}

// SummaryText is the summary as text for people (`sandgate check`).
func (p *Policy) SummaryText() (string, error) {
	b, err := p.bytesOp(func(pp *C.sg_policy, out *C.sg_bytes, e **C.sg_error) C.sg_status {
		return C.sg_policy_summary(pp, true, out, e)
	})
	return string(b), err
}

// Decision is the network authorizer's answer.
type Decision struct {
	Allowed bool   `json:"allowed"`
	Reason  string `json:"reason"`
	Rule    string `json:"rule"`
}

// AuthorizeRequest is a destination to ask the network authorizer about.
type AuthorizeRequest struct {
	Scheme   string // "https", "http", "wss", "ws"
	Host     string
	Port     int    // < 0 or 0: the scheme's default; over 65535: E_REQUEST
	IP       string // the address about to be dialled; "" for none
	Redirect bool   // apply the stricter redirect-hop rules
}

// Authorize asks the network authorizer (docs/reference/policy.md) whether the destination
// may be dialled. A refusal answers the decision and an *Error with code
// E_NET_DENIED.
func (p *Policy) Authorize(r AuthorizeRequest) (Decision, error) {
	var d Decision
	port := r.Port
	if port <= 0 {
		port = -1
	} else if port > 65535 {
		// C.int32_t(port) would keep the low 32 bits: 1<<32 + 443 would
		// be asked about as 443, 1<<31 + 443 as a negative "default".
		return d, requestError("port " + strconv.Itoa(port) + " is over 65535")
	}
	var raw []byte
	err := p.with(func(pp *C.sg_policy) error {
		var b C.sg_bytes
		var e *C.sg_error
		s, sn := cstr(r.Scheme)
		h, hn := cstr(r.Host)
		var ip *C.char
		var ipn C.size_t
		if r.IP != "" {
			ip, ipn = cstr(r.IP)
		}
		st := C.sg_policy_authorize(pp, s, sn, h, hn, C.int32_t(port), ip, ipn, C.bool(r.Redirect), &b, &e)
		raw = takeBytes(&b)
		if st != C.SG_OK {
			return takeError(st, e)
		}
		return nil
	})
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &d)
	}
	return d, err
}
