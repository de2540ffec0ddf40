// Package testasset gives the infra tests what synthesizing a stack needs from outside: the
// function assets (zips holding a stub bootstrap, since the tests never run them: the worker's,
// and beside it the API's, ApiZip) and a quiet jsii.
package testasset

import (
	"archive/zip"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/jsii-runtime-go"
)

// Main is a test package's TestMain: it sets *zipPath to a stub worker zip (Setup), runs the
// tests, closes jsii's Node process and removes the zip, then exits with the tests' code.
func Main(m *testing.M, zipPath *string) {
	path, cleanup, err := Setup()
	if err != nil {
		panic(err)
	}
	*zipPath = path
	code := m.Run()
	jsii.Close()
	cleanup()
	os.Exit(code)
}

// Setup quiets jsii's warning about Node 20 and writes a stub worker zip, and the API's beside it
// (ApiZip), into a new temporary directory. It returns the worker zip's path and a function that
// removes the directory.
func Setup() (zipPath string, cleanup func(), err error) {
	os.Setenv("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
	dir, err := os.MkdirTemp("", "infra-test")
	if err != nil {
		return "", nil, err
	}
	zipPath = filepath.Join(dir, "worker-arm64.zip")
	for _, p := range []string{zipPath, ApiZip(zipPath)} {
		if err := WriteWorkerZip(p); err != nil {
			os.RemoveAll(dir)
			return "", nil, err
		}
	}
	return zipPath, func() { os.RemoveAll(dir) }, nil
}

// ApiZip returns the path of the stub API zip Setup writes beside the worker zip workerZip.
func ApiZip(workerZip string) string { return filepath.Join(filepath.Dir(workerZip), "api-arm64.zip") }

// WriteWorkerZip writes a zip holding an executable stub named bootstrap, the shape of the
// function assets `make build` produces.
func WriteWorkerZip(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	zw := zip.NewWriter(f)
	h := &zip.FileHeader{Name: "bootstrap", Method: zip.Deflate}
	h.SetMode(0o755)
	w, err := zw.CreateHeader(h)
	if err == nil {
		_, err = w.Write([]byte("#!/bin/sh\n"))
	}
	if err == nil {
		err = zw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
