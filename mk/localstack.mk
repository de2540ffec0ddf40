# LocalStack targets (opt-in: they need a Docker engine, which the project's CI machine lacks).
# See docs/LOCALSTACK.md.
LOCALSTACK_COMPOSE  := docker compose -f localstack/docker-compose.yml
LOCALSTACK_ENDPOINT ?= http://localhost:4566
LOCALSTACK_STACK    ?= demo

.PHONY: localstack-up localstack-down localstack-test localstack-test-running localstack-check-docker

localstack-check-docker:
	@docker info >/dev/null 2>&1 || { echo "LocalStack needs a running Docker engine, and none answers (docker info failed)."; exit 1; }

localstack-up: localstack-check-docker ## Start LocalStack 4.14.0 on :4566 and provision LOCALSTACK_STACK (default demo)
	$(LOCALSTACK_COMPOSE) up -d --wait
	$(GO) run ./cmd/sqsworker up --stack $(LOCALSTACK_STACK) --endpoint $(LOCALSTACK_ENDPOINT)

localstack-down: localstack-check-docker ## Stop LocalStack and remove its container (its state goes with it)
	$(LOCALSTACK_COMPOSE) down

localstack-test: localstack-check-docker ## go test -race on LocalStack, in a container of its own (testcontainers-go)
	SQSWORKER_BACKEND=localstack $(GO) test -race -count=1 -timeout 20m $(PKGS)

localstack-test-running: ## go test -race against the LocalStack that localstack-up started
	SQSWORKER_BACKEND=endpoint AWS_ENDPOINT_URL=$(LOCALSTACK_ENDPOINT) $(GO) test -race -count=1 -timeout 20m $(PKGS)
