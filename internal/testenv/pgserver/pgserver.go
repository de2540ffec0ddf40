// Package pgserver starts a throwaway PostgreSQL cluster: initdb into a temporary directory, a
// postgres process on a free loopback port, trust authentication for the superuser "postgres",
// and everything removed by Stop. The tests of the PostgreSQL outbox (through internal/testenv/pgtest)
// and `sqsworker demo` use it; nothing needs to be installed but the server's binaries.
//
// The binaries are found the way Debian and Ubuntu lay them out (/usr/lib/postgresql/<version>/bin,
// the newest version first), then on PATH; SQSWORKER_PG_BIN names another directory. initdb
// refuses to run as root, so when the process is root the cluster belongs to an unprivileged
// user ("postgres" when it exists, else "nobody") and the server runs as that user.
package pgserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNotInstalled is returned when no PostgreSQL server binaries are found.
var ErrNotInstalled = errors.New("no PostgreSQL server binaries found (looked for initdb and postgres in $SQSWORKER_PG_BIN, /usr/lib/postgresql/*/bin and PATH): install them with `apt-get install postgresql-15` (Debian/Ubuntu), or set SQSWORKER_PG_BIN to their directory")

// InstallHint says how to get the binaries.
const InstallHint = "apt-get install postgresql-15"

// Options configures Start. The zero value is a fast, non-durable cluster for tests.
type Options struct {
	// BinDir holds initdb and postgres. Defaults to FindBinDir().
	BinDir string
	// Durable keeps PostgreSQL's default durability (fsync, synchronous_commit, full-page
	// writes), for measurements. Defaults to false: tests need no crash safety.
	Durable bool
	// Settings are extra server settings (name → value, as postgres -c name=value).
	Settings map[string]string
	// StartTimeout bounds initdb plus the server's start. Defaults to 2 minutes.
	StartTimeout time.Duration
	// TLS makes the server accept TLS connections (and plain ones, as before) with a
	// certificate for 127.0.0.1 and localhost signed by a CA made for it, which no trust store
	// knows: Server.CAFile is that CA's certificate, for sslrootcert. Defaults to false.
	TLS bool
}

// Server is a running throwaway cluster.
type Server struct {
	// Port is the loopback TCP port it listens on (127.0.0.1).
	Port int
	// BinDir is where its binaries came from.
	BinDir string
	// Version is the server's version, such as "PostgreSQL 15.18".
	Version string
	// CAFile is, with Options.TLS, the PEM file of the CA that signed the server's
	// certificate (removed by Stop).
	CAFile string

	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	log  string

	stopOnce sync.Once
	stopErr  error
	dbs      int
	mu       sync.Mutex
}

// FindBinDir returns the directory of the newest PostgreSQL server binaries, or ErrNotInstalled.
func FindBinDir() (string, error) {
	if d := os.Getenv("SQSWORKER_PG_BIN"); d != "" {
		if hasServer(d) {
			return d, nil
		}
		return "", fmt.Errorf("SQSWORKER_PG_BIN=%s has no initdb and postgres: %w", d, ErrNotInstalled)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if hasServer(d) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil && hasServer(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	return "", ErrNotInstalled
}

// versionOf reads the major version out of /usr/lib/postgresql/<version>/bin.
func versionOf(dir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(dir)), 64)
	return v
}

func hasServer(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// Start creates and starts a cluster. Stop it with Stop.
func Start(ctx context.Context, opts Options) (*Server, error) {
	bin := opts.BinDir
	if bin == "" {
		var err error
		if bin, err = FindBinDir(); err != nil {
			return nil, err
		}
	}
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	cred, err := serverCredential()
	if err != nil {
		return nil, err
	}
	dir, err := makeDir(cred)
	if err != nil {
		return nil, err
	}
	s := &Server{BinDir: bin, dir: dir, done: make(chan struct{}), log: filepath.Join(dir, "postgres.log")}
	fail := func(err error) (*Server, error) {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if out, err := exec.Command(filepath.Join(bin, "postgres"), "--version").Output(); err == nil {
		// "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)" → "PostgreSQL 15.18"
		if f := strings.Fields(string(out)); len(f) >= 3 {
			s.Version = "PostgreSQL " + f[2]
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.Dir = dir
	initdb.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("pgserver: initdb: %v\n%s", err, out))
	}
	settings := map[string]string{
		"listen_addresses":        "127.0.0.1",
		"unix_socket_directories": "",
		"max_connections":         "300",
		"timezone":                "UTC",
		"log_min_messages":        "warning",
		"log_timezone":            "UTC",
	}
	if !opts.Durable {
		settings["fsync"] = "off"
		settings["synchronous_commit"] = "off"
		settings["full_page_writes"] = "off"
	}
	if opts.TLS {
		tls, ca, err := writeTLS(dir, cred)
		if err != nil {
			return fail(err)
		}
		for k, v := range tls {
			settings[k] = v
		}
		s.CAFile = ca
	}
	for k, v := range opts.Settings {
		settings[k] = v
	}
	// The port is found free and then bound by postgres: another process may take it in
	// between, so a start that fails to bind is tried again on another port.
	for try := 0; ; try++ {
		port, err := freePort()
		if err != nil {
			return fail(err)
		}
		err = s.startPostgres(ctx, data, port, settings, cred)
		if err == nil {
			break
		}
		if try < 4 && strings.Contains(err.Error(), "could not bind") {
			continue
		}
		return fail(err)
	}
	return s, nil
}

func (s *Server) startPostgres(ctx context.Context, data string, port int, settings map[string]string, cred *syscall.Credential) error {
	args := []string{"-D", data, "-p", strconv.Itoa(port)}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "-c", k+"="+settings[k])
	}
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("pgserver: %w", err)
	}
	defer logf.Close()
	if cred != nil {
		_ = logf.Chown(int(cred.Uid), int(cred.Gid))
	}
	cmd := exec.Command(filepath.Join(s.BinDir, "postgres"), args...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	// Pdeathsig: a test binary that dies (a panic, a timeout) takes its server with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgserver: start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.Port = port
	for {
		c, err := pgx.Connect(ctx, s.DSN("postgres"))
		if err == nil {
			_ = c.Close(ctx)
			s.cmd, s.done = cmd, done
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("pgserver: postgres exited at start:\n%s", s.logTail())
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGQUIT)
			<-done
			return fmt.Errorf("pgserver: postgres did not accept connections: %v\n%s", ctx.Err(), s.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(bytes.TrimSpace(b))
}

// DSN returns the connection string of a database of the cluster, as the superuser.
func (s *Server) DSN(database string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, database)
}

// CreateDatabase creates a database named prefix_<n> (n counts this server's databases) and
// returns its DSN.
func (s *Server) CreateDatabase(ctx context.Context, prefix string) (string, error) {
	s.mu.Lock()
	s.dbs++
	name := fmt.Sprintf("%s_%d", sanitize(prefix), s.dbs)
	s.mu.Unlock()
	c, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return "", fmt.Errorf("pgserver: %w", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE template0"); err != nil {
		return "", fmt.Errorf("pgserver: create database %s: %w", name, err)
	}
	return s.DSN(name), nil
}

// sanitize makes a database name out of s: lower-case letters, digits and '_', at most 40.
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else if b.Len() > 0 && !strings.HasSuffix(b.String(), "_") {
			b.WriteByte('_')
		}
		if b.Len() >= 40 {
			break
		}
	}
	if b.Len() == 0 {
		return "db"
	}
	return strings.TrimSuffix(b.String(), "_")
}

// Stop shuts the server down (fast shutdown) and removes its directory. It is safe to call
// more than once.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		if s.cmd != nil && s.cmd.Process != nil {
			_ = s.cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-s.done:
			case <-time.After(30 * time.Second):
				_ = s.cmd.Process.Kill()
				<-s.done
				s.stopErr = errors.New("pgserver: postgres did not stop within 30 s; killed")
			}
		}
		if err := os.RemoveAll(s.dir); err != nil && s.stopErr == nil {
			s.stopErr = fmt.Errorf("pgserver: %w", err)
		}
	})
	return s.stopErr
}

// serverCredential returns the unprivileged user to run initdb and postgres as when this
// process is root (initdb refuses root), or nil.
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil || uid == 0 {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
	}
	return nil, errors.New("pgserver: running as root and found no unprivileged user (postgres, nobody) to run PostgreSQL as: initdb refuses root")
}

// makeDir creates the cluster's directory, owned by cred's user when given, somewhere that
// user can reach (every parent directory searchable).
func makeDir(cred *syscall.Credential) (string, error) {
	parents := []string{os.TempDir()}
	if cred != nil {
		parents = append(parents, "/tmp", "/var/tmp")
	}
	var lastErr error
	for _, parent := range parents {
		if cred != nil && !searchable(parent) {
			lastErr = fmt.Errorf("pgserver: %s is not searchable by the server's user", parent)
			continue
		}
		dir, err := os.MkdirTemp(parent, "sqsworker-pg-")
		if err != nil {
			lastErr = err
			continue
		}
		if cred != nil {
			if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
				_ = os.RemoveAll(dir)
				lastErr = err
				continue
			}
		}
		return dir, nil
	}
	return "", fmt.Errorf("pgserver: no directory for the cluster: %w", lastErr)
}

// searchable reports whether every directory from dir up to / can be searched by others.
func searchable(dir string) bool {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&fs.FileMode(0o001) == 0 {
			return false
		}
		if d == "/" || d == "." {
			return true
		}
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgserver: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
