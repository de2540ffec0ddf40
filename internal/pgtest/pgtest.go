// Package pgtest gives tests a real PostgreSQL server: one throwaway cluster per test binary
// (internal/pgserver), started at the first use and stopped by Main, with a fresh database per
// test.
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		dsn := pgtest.Database(t) // a new, empty database
//		…
//	}
//
// Where the server's binaries are missing, tests skip and say how to install them; under
// CI=true a missing server fails the test instead, so that CI never passes by skipping.
package pgtest

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/sqsworker/sqsworker/internal/pgserver"
)

var (
	once   sync.Once
	server *pgserver.Server
	err    error
)

// Main runs the tests and stops the shared server afterwards. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if server != nil {
		if err := server.Stop(); err != nil {
			os.Stderr.WriteString("pgtest: " + err.Error() + "\n")
		}
	}
	os.Exit(code)
}

// Server returns the shared server, starting it at the first call. Without binaries it skips
// the test (fails it under CI=true).
func Server(t testing.TB) *pgserver.Server {
	t.Helper()
	once.Do(func() {
		server, err = pgserver.Start(context.Background(), pgserver.Options{})
	})
	if err != nil {
		if errors.Is(err, pgserver.ErrNotInstalled) && os.Getenv("CI") != "true" {
			t.Skipf("pgtest: %v", err)
		}
		t.Fatalf("pgtest: PostgreSQL is needed (CI=%q): %v", os.Getenv("CI"), err)
	}
	return server
}

// Database creates an empty database on the shared server for this test and returns its DSN
// (the superuser, trust authentication, loopback).
func Database(t testing.TB) string {
	t.Helper()
	s := Server(t)
	dsn, err := s.CreateDatabase(context.Background(), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}
