# Infrastructure: the CDK (Go) app in infra/, its own Go module (library users never download CDK).
# synth runs the app offline (no account, no lookups, no notices or telemetry); diff and deploy need
# AWS credentials and a bootstrapped account (`npx cdk bootstrap`), so they cannot run here.
INFRA_ENV := JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 CDK_DISABLE_CLI_TELEMETRY=true GOFLAGS=-mod=mod
# The CLI is pinned in infra/_cdk/package.json + package-lock.json: a directory whose name starts
# with "_" so that `go test ./...` never walks the Go files inside node_modules.
CDK       := $(INFRA_ENV) _cdk/node_modules/.bin/cdk
CDK_FLAGS := --no-notices --no-version-reporting --lookups=false
CDK_CTX   ?=

.PHONY: infra-deps synth diff deploy destroy infra-test infra-lint

infra-deps: ## Install the CDK CLI pinned in infra/_cdk/package-lock.json
	@test -x infra/_cdk/node_modules/.bin/cdk || (cd infra/_cdk && npm ci --no-audit --no-fund)

synth: build infra-deps ## Synthesize the stack into infra/cdk.out (CDK_CTX='-c fifo=true …' to configure)
	cd infra && $(CDK) synth $(CDK_FLAGS) --quiet $(CDK_CTX)

diff: build infra-deps ## Diff the stack against the deployed one (needs AWS credentials)
	cd infra && $(CDK) diff $(CDK_FLAGS) $(CDK_CTX)

deploy: build infra-deps ## Deploy the stack (needs AWS credentials and a bootstrapped account)
	cd infra && $(CDK) deploy $(CDK_FLAGS) --require-approval broadening $(CDK_CTX)

destroy: build infra-deps ## Delete the deployed stack (asks first; the table stays if deletion protection is on)
	cd infra && $(CDK) destroy $(CDK_FLAGS) $(CDK_CTX)

infra-test: ## Vet and test the infra module (serial tests: they share one Node process), then infra-lint
	cd infra && $(INFRA_ENV) $(GO) vet ./... && $(INFRA_ENV) $(GO) test -count=1 -p 1 ./...
	@$(MAKE) --no-print-directory infra-lint

# cfn-lint checks the templates against CloudFormation's resource schemas (lengths, patterns,
# enums, references), which CDK's own checks and the assertions tests do not all cover. It runs
# over every shape of infra/internal/shapes. Ignored, with its reason: W3005 "dependency already
# enforced by a GetAtt": CDK puts the worker role in the function's DependsOn although the
# function's Role already references it; the extra DependsOn is redundant and harmless.
# Without cfn-lint on PATH the target says so and passes (PyPI may be out of reach).
CFN_LINT_FLAGS := --ignore-checks W3005

infra-lint: ## cfn-lint every synthesized stack shape (infra/internal/shapes); says so and passes without cfn-lint
	@if ! command -v cfn-lint >/dev/null 2>&1; then \
		echo "infra-lint: cfn-lint is not on PATH: the synthesized templates were NOT linted. Install it with 'pip install cfn-lint' and run 'make infra-lint'."; \
	else \
		dir=$$(mktemp -d) && trap 'rm -rf "$$dir"' EXIT && \
		(cd infra && $(INFRA_ENV) $(GO) run ./internal/shapes/synthshapes -out "$$dir" >/dev/null) && \
		echo "infra-lint: $$(cfn-lint --version) over $$(ls "$$dir"/*.template.json | wc -l) templates (infra/internal/shapes)" && \
		cfn-lint $(CFN_LINT_FLAGS) -- "$$dir"/*.template.json && echo "infra-lint: no findings"; \
	fi
