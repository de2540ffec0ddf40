package awslocal

import (
	"context"
	"os/exec"
	"strings"
	"testing"
)

// TestLocalStackNotLinkedSaysWhatToImport: a program that asks for LocalStack without linking
// the package that provides it is told what to import. Not parallel: it hides the registration
// the test binary has (through awslocaltest) for its duration.
func TestLocalStackNotLinkedSaysWhatToImport(t *testing.T) {
	starters.Lock()
	saved := starters.m[LocalStack]
	delete(starters.m, LocalStack)
	starters.Unlock()
	t.Cleanup(func() {
		starters.Lock()
		defer starters.Unlock()
		if saved != nil {
			starters.m[LocalStack] = saved
		}
	})
	_, err := Start(context.Background(), Options{Backend: LocalStack})
	want := `awslocal: backend "localstack" is not linked into this program: import _ "github.com/sqsworker/sqsworker/pkg/awslocal/localstack" (Docker needed)`
	if err == nil || err.Error() != want {
		t.Errorf("Start = %v, want %s", err, want)
	}
}

// TestRegisteredBackendGetsTestCredentials: a registered backend's URL is the clients' endpoint,
// with the fixed test credentials, and Close stops it.
func TestRegisteredBackendGetsTestCredentials(t *testing.T) {
	t.Parallel()
	stopped := false
	Register("test-backend", func(context.Context) (string, func(), error) {
		return "http://127.0.0.1:9", func() { stopped = true }, nil
	})
	t.Cleanup(func() { // so that the test runs again (-count)
		starters.Lock()
		defer starters.Unlock()
		delete(starters.m, "test-backend")
	})
	b, err := Start(context.Background(), Options{Backend: "test-backend"})
	if err != nil {
		t.Fatal(err)
	}
	creds, err := b.Config.Credentials.Retrieve(context.Background())
	if b.URL != "http://127.0.0.1:9" || *b.Config.BaseEndpoint != b.URL || err != nil || creds.AccessKeyID != "test" {
		t.Errorf("backend %+v, credentials %+v, %v", b, creds, err)
	}
	b.Close()
	if !stopped {
		t.Error("Close did not stop the backend")
	}
}

// TestNoDockerDependencies: the package (what a program using the embedded emulator imports)
// depends on neither testcontainers-go nor the Docker client; only pkg/awslocal/localstack does.
func TestNoDockerDependencies(t *testing.T) {
	t.Parallel()
	dockerDeps := func(pkg string) []string {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		var docker []string
		for _, d := range strings.Fields(string(out)) {
			if strings.Contains(d, "testcontainers") || strings.Contains(d, "docker") || strings.Contains(d, "moby") {
				docker = append(docker, d)
			}
		}
		return docker
	}
	if d := dockerDeps("."); len(d) > 0 {
		t.Errorf("pkg/awslocal depends on %d Docker packages: %s", len(d), strings.Join(d, " "))
	}
	if d := dockerDeps("./localstack"); len(d) == 0 {
		t.Error("pkg/awslocal/localstack depends on no Docker package: the check above would see nothing")
	}
}
