// Fresh-install check of the Go module: a confined read, a refused escape
// and a confined command, against the policy given as the first argument.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/sandgate-dev/sandgate/bindings/go"
)

const (
	note    = "hello from the workspace\n"
	command = "cat note.txt; cat ../private/secret.txt"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "go: FAIL: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	fmt.Printf("go: sandgate %s (linked statically)\n", sandgate.Version())
	policy, err := sandgate.LoadPolicy(os.Args[1])
	if err != nil {
		fail("%v", err)
	}
	defer policy.Close()
	sb, err := sandgate.SandboxFromPolicy(policy)
	if err != nil {
		fail("%v", err)
	}
	text, err := sb.Read("note.txt")
	if err != nil || string(text) != note {
		fail("read note.txt: %q, %v", text, err)
	}
	fmt.Printf("go: read note.txt -> %q\n", text)
	_, err = sb.Read("../private/secret.txt")
	var se *sandgate.Error
	if !errors.As(err, &se) {
		fail("a read outside the workspace answered %v", err)
	}
	fmt.Printf("go: read ../private/secret.txt -> refused %s\n", se.Code)
	sb.Close()
	ex, err := sandgate.NewExecutor(policy)
	if err != nil {
		fail("%v", err)
	}
	defer ex.Close()
	r, err := ex.Exec(context.Background(), command, sandgate.ExecOptions{})
	if err != nil {
		fail("exec: %v", err)
	}
	fs, _ := r.Confinement["fs"].(bool)
	fmt.Printf("go: exec %q -> exit %d, stdout %q, landlock fs %v\n", command, r.ExitCode, r.Stdout, fs)
	if !strings.HasPrefix(string(r.Stdout), note) {
		fail("the command's output lacks the note")
	}
	if fs && (strings.Contains(string(r.Stdout), "secret") || r.ExitCode == 0) {
		fail("the shell read outside its roots")
	}
	fmt.Println("go: ok")
}
