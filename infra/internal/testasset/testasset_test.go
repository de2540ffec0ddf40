package testasset

import (
	"archive/zip"
	"os"
	"testing"
)

func TestSetupWritesAnExecutableBootstrap(t *testing.T) {
	path, cleanup, err := Setup()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, ApiZip(path)} {
		zr, err := zip.OpenReader(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(zr.File) != 1 || zr.File[0].Name != "bootstrap" || zr.File[0].Mode().Perm()&0o100 == 0 {
			t.Errorf("%s holds %d files, first %q mode %v; want one executable bootstrap", p, len(zr.File), zr.File[0].Name, zr.File[0].Mode())
		}
		zr.Close()
	}
	cleanup()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("cleanup left %s: %v", path, err)
	}
}
