// Package pgtest gives tests a real PostgreSQL server: one throwaway cluster per test binary
// (internal/testenv/pgserver), started at the first use and stopped by Main, with a fresh database per
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

	"github.com/sqsworker/sqsworker/internal/testenv/pgserver"
)

var (
	once   sync.Once
	server *pgserver.Server
	err    error

	durableOnce sync.Once
	durable     *pgserver.Server
	durableErr  error
)

// Main runs the tests and stops the shared server afterwards. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	for _, s := range []*pgserver.Server{server, durable} {
		if s == nil {
			continue
		}
		if err := s.Stop(); err != nil {
			os.Stderr.WriteString("pgtest: " + err.Error() + "\n")
		}
	}
	os.Exit(code)
}

// Server returns the shared server, starting it at the first call. It accepts TLS connections
// too (pgserver.Options.TLS; its CAFile verifies them). Without binaries it skips
// the test (fails it under CI=true).
func Server(t testing.TB) *pgserver.Server {
	t.Helper()
	once.Do(func() {
		// TLS as well as plain connections: Server(t).CAFile verifies its certificate.
		server, err = pgserver.Start(context.Background(), pgserver.Options{TLS: true})
	})
	need(t, err)
	return server
}

// DurableServer is Server with PostgreSQL's default durability (fsync and synchronous commit
// on), for benchmarks; a second cluster, also stopped by Main.
func DurableServer(t testing.TB) *pgserver.Server {
	t.Helper()
	durableOnce.Do(func() {
		durable, durableErr = pgserver.Start(context.Background(), pgserver.Options{Durable: true})
	})
	need(t, durableErr)
	return durable
}

func need(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		if errors.Is(err, pgserver.ErrNotInstalled) && os.Getenv("CI") != "true" {
			t.Skipf("pgtest: %v", err)
		}
		t.Fatalf("pgtest: PostgreSQL is needed (CI=%q): %v", os.Getenv("CI"), err)
	}
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
