package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// workerSettings returns the SQSWORKER_* variables the worker function reads: those
// functions/internal/config's LoadWorker names, itself or through the functions it calls,
// read from the package's source.
func workerSettings(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../functions/internal/config/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("the config package's files: %v", err)
	}
	fset := token.NewFileSet()
	consts := map[string]string{}       // Env… constant → its value
	funcs := map[string]*ast.FuncDecl{} // the package's functions
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					funcs[d.Name.Name] = d
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					vs, ok := spec.(*ast.ValueSpec)
					if !ok {
						continue
					}
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								v, _ := strconv.Unquote(lit.Value)
								if strings.HasPrefix(v, "SQSWORKER_") {
									consts[name.Name] = v
								}
							}
						}
					}
				}
			}
		}
	}
	if funcs["LoadWorker"] == nil {
		t.Fatal("no LoadWorker in functions/internal/config")
	}
	seen, vars := map[string]bool{}, map[string]bool{}
	var walk func(fn *ast.FuncDecl)
	walk = func(fn *ast.FuncDecl) {
		if seen[fn.Name.Name] {
			return
		}
		seen[fn.Name.Name] = true
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				if v, ok := consts[id.Name]; ok {
					vars[v] = true
				}
				if callee, ok := funcs[id.Name]; ok {
					walk(callee)
				}
			}
			return true
		})
	}
	walk(funcs["LoadWorker"])
	var out []string
	for v := range vars {
		out = append(out, v)
	}
	slices.Sort(out)
	if len(out) < 8 {
		t.Fatalf("found only %v read by LoadWorker: the source changed shape?", out)
	}
	return out
}

// TestRunGivesTheWorkerEverySetting: every variable the worker reads is either set by run from
// the stack (as the CDK stack sets it) or left to run's own environment on purpose, and run sets
// every stack setting, the payload bucket among them (it used to give none, and the worker
// dead-lettered every job kept in S3 as malformed).
func TestRunGivesTheWorkerEverySetting(t *testing.T) {
	t.Parallel()
	for _, v := range workerSettings(t) {
		inStack, inShell := slices.Contains(runStackEnv, v), slices.Contains(runShellEnv, v)
		if inStack == inShell {
			t.Errorf("%s: the worker reads it; want it in exactly one of runStackEnv (%v) and runShellEnv (%v)", v, inStack, inShell)
		}
	}
	st := runStack{QueueURL: "http://localhost:4566/000000000000/s-jobs", DLQURL: "http://localhost:4566/000000000000/s-jobs-dlq",
		Table: "s-jobs", ScheduleGroup: "s-jobs", PayloadBucket: "s-payloads"}
	env := functionEnv(st, "http://localhost:4566", "us-east-1", aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, "s")
	values := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		values[k] = v
	}
	for _, v := range runStackEnv {
		if values[v] == "" {
			t.Errorf("functionEnv sets no %s: %q", v, env)
		}
	}
	for _, v := range runShellEnv {
		if _, ok := values[v]; ok {
			t.Errorf("functionEnv sets %s, which is left to run's environment", v)
		}
	}
	if values["SQSWORKER_PAYLOAD_BUCKET"] != "s-payloads" || values["AWS_ENDPOINT_URL"] != "http://localhost:4566" {
		t.Errorf("env = %q", env)
	}
	st.PayloadBucket = ""
	for _, kv := range functionEnv(st, "http://localhost:4566", "us-east-1", aws.Credentials{}, "s") {
		if strings.HasPrefix(kv, "SQSWORKER_PAYLOAD_BUCKET=") {
			t.Errorf("a stack without a bucket gets %s", kv)
		}
	}
}
