package sandgate

/*
#include "sandgate.h"
*/
import "C"

import (
	"encoding/json"
	"os"
	"reflect"
	"sort"
	"strconv"
	"unicode/utf8"
)

// PolicyOption sets one key of a policy stated from code (NewPolicy,
// NewExecutorWith). Each sets the policy file's key of the same name;
// keys left out take the file's defaults, and the file's gate rules apply.
// A key or a string inside a value that is not valid UTF-8 is refused by
// NewPolicy with E_REQUEST (JSON would alter it), and so is a value
// holding a []byte (JSON would send it as base64 text).
type PolicyOption func(*policyOptions)

type policyOptions struct {
	baseDir string
	keys    map[string]any
}

// Set sets the policy key named key (the file's name without its section:
// "write_root", "timeout_ms", "allow", "exec_ops", ...) to value. The
// typed options below are shorthands for it; an unknown key is refused by
// NewPolicy with E_POLICY naming it.
func Set(key string, value any) PolicyOption {
	return func(o *policyOptions) { o.keys[key] = value }
}

// BaseDir is where relative roots resolve (default: the working directory).
func BaseDir(dir string) PolicyOption { return func(o *policyOptions) { o.baseDir = dir } }

// SecurityMode sets security_mode ("restricted" or "trusted_host").
func SecurityMode(mode string) PolicyOption { return Set("security_mode", mode) }

// ReadRoots sets fs.read_roots.
func ReadRoots(dirs ...string) PolicyOption { return Set("read_roots", dirs) }

// WriteRoot sets fs.write_root.
func WriteRoot(dir string) PolicyOption { return Set("write_root", dir) }

// DenyWrite sets fs.deny_write.
func DenyWrite(patterns ...string) PolicyOption { return Set("deny_write", patterns) }

// ExecEnabled sets exec.enabled.
func ExecEnabled(on bool) PolicyOption { return Set("enabled", on) }

// Shell sets exec.shell (an absolute path).
func Shell(path string) PolicyOption { return Set("shell", path) }

// TimeoutMs sets exec.timeout_ms, the longest any command runs.
func TimeoutMs(ms uint64) PolicyOption { return Set("timeout_ms", ms) }

// MaxOutputBytes sets exec.max_output_bytes.
func MaxOutputBytes(n uint64) PolicyOption { return Set("max_output_bytes", n) }

// EnvInherit sets exec.env_inherit.
func EnvInherit(names ...string) PolicyOption { return Set("env_inherit", names) }

// Confine sets exec.confine ("off", "best_effort", "required").
func Confine(mode string) PolicyOption { return Set("confine", mode) }

// MaxMemoryBytes sets exec.max_memory_bytes: the memory of a command's tree.
func MaxMemoryBytes(n uint64) PolicyOption { return Set("max_memory_bytes", n) }

// MaxTasks sets exec.max_tasks: the processes and threads of a command's tree.
func MaxTasks(n uint64) PolicyOption { return Set("max_tasks", n) }

// MaxCPUMs sets exec.max_cpu_ms: the CPU time of a command's tree.
func MaxCPUMs(ms uint64) PolicyOption { return Set("max_cpu_ms", ms) }

// ProcessAllow sets exec.process_allow.
func ProcessAllow(entries ...string) PolicyOption { return Set("process_allow", entries) }

// NetAllow sets net.allow.
func NetAllow(entries ...string) PolicyOption { return Set("allow", entries) }

// AllowHTTP sets net.allow_http.
func AllowHTTP(on bool) PolicyOption { return Set("allow_http", on) }

// ExecOps sets budgets.exec_ops.
func ExecOps(n uint64) PolicyOption { return Set("exec_ops", n) }

// NewPolicy states a policy from code: the options are the policy file's
// keys, resolved through the same decoder and gate rules (a refusal is an
// *Error with code E_POLICY naming the dotted key).
func NewPolicy(opts ...PolicyOption) (*Policy, error) {
	o := policyOptions{keys: map[string]any{}}
	for _, f := range opts {
		f(&o)
	}
	if o.baseDir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		o.baseDir = wd
	}
	keys := make([]string, 0, len(o.keys))
	for k := range o.keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !utf8.ValidString(k) || !validUTF8(reflect.ValueOf(o.keys[k]), 0) {
			return nil, requestError("policy option " + strconv.Quote(k) + " is not valid UTF-8 (JSON would alter it)")
		}
		if holdsBytes(reflect.ValueOf(o.keys[k]), 0) {
			return nil, requestError("policy option " + strconv.Quote(k) + " holds a []byte, which JSON would send as base64 text; give a string")
		}
	}
	text, err := json.Marshal(o.keys)
	if err != nil {
		return nil, requestError("policy options: " + err.Error())
	}
	var out *C.sg_policy
	var e *C.sg_error
	j, jn := cstr(string(text))
	b, bn := cstr(o.baseDir)
	if st := C.sg_policy_from_options(j, jn, b, bn, &out, &e); st != C.SG_OK {
		return nil, takeError(st, e)
	}
	return newPolicy(out), nil
}

// NewExecutorWith is the executor a policy stated from code grants:
// NewExecutorWith(WriteRoot("/srv/work"), ExecEnabled(true), TimeoutMs(30000)).
func NewExecutorWith(opts ...PolicyOption) (*Executor, error) {
	p, err := NewPolicy(opts...)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	return NewExecutor(p)
}

// validUTF8 reports whether every string in v (through pointers,
// interfaces, slices, arrays, map keys and values, and struct fields) is
// valid UTF-8: encoding/json writes each invalid byte as U+FFFD without an
// error, which would state a root or a pattern the caller did not write.
// Past a depth of 64 it stops (json.Marshal refuses such cycles itself).
func validUTF8(v reflect.Value, depth int) bool {
	if depth > 64 || !v.IsValid() {
		return true
	}
	switch v.Kind() {
	case reflect.String:
		return utf8.ValidString(v.String())
	case reflect.Pointer, reflect.Interface:
		return v.IsNil() || validUTF8(v.Elem(), depth+1)
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return true // bytes: JSON sends them as base64
		}
		for i := 0; i < v.Len(); i++ {
			if !validUTF8(v.Index(i), depth+1) {
				return false
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			if !validUTF8(it.Key(), depth+1) || !validUTF8(it.Value(), depth+1) {
				return false
			}
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() && !validUTF8(v.Field(i), depth+1) {
				return false
			}
		}
	}
	return true
}

// holdsBytes reports whether v holds a byte slice or array anywhere (as
// validUTF8 walks it): encoding/json sends one as base64 text, so
// Set("write_root", []byte("ws")) would state the root "d3M=" and a deny
// pattern []byte("*.lock") one that protects nothing. No policy key takes
// bytes.
func holdsBytes(v reflect.Value, depth int) bool {
	if depth > 64 || !v.IsValid() {
		return false
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		return !v.IsNil() && holdsBytes(v.Elem(), depth+1)
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return true
		}
		for i := 0; i < v.Len(); i++ {
			if holdsBytes(v.Index(i), depth+1) {
				return true
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			if holdsBytes(it.Key(), depth+1) || holdsBytes(it.Value(), depth+1) {
				return true
			}
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() && holdsBytes(v.Field(i), depth+1) {
				return true
			}
		}
	}
	return false
}
