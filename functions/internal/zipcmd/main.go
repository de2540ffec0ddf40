// Command zipcmd writes a zip archive of files, each stored under its base name with mode 0755
// (Lambda needs bootstrap to be executable). make build uses it when the zip program is absent:
//
//	go run ./functions/internal/zipcmd dist/worker-arm64.zip dist/worker/arm64/bootstrap
package main

import (
	"archive/zip"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: zipcmd OUT.zip FILE...")
		os.Exit(2)
	}
	if err := write(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "zipcmd:", err)
		os.Exit(1)
	}
}

func write(out string, files []string) (err error) {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	zw := zip.NewWriter(f)
	for _, name := range files {
		if err := add(zw, name); err != nil {
			return err
		}
	}
	return zw.Close()
}

func add(zw *zip.Writer, name string) error {
	src, err := os.Open(name)
	if err != nil {
		return err
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return err
	}
	h, err := zip.FileInfoHeader(st)
	if err != nil {
		return err
	}
	h.Name = filepath.Base(name)
	h.Method = zip.Deflate
	h.SetMode(0o755)
	w, err := zw.CreateHeader(h)
	if err != nil {
		return err
	}
	_, err = io.Copy(w, src)
	return err
}
