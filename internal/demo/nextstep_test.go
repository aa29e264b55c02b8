package demo

import (
	"errors"
	"strings"
	"testing"
)

func TestNextStep(t *testing.T) {
	onPath := func(string) (string, error) { return "/usr/local/bin/ochatd", nil }
	notOnPath := func(string) (string, error) { return "", errors.New("not found") }
	if got := nextStep(onPath); !strings.Contains(got, "`ochatd chat") || strings.Contains(got, "go run") {
		t.Errorf("on PATH: %q", got)
	}
	if got := nextStep(notOnPath); !strings.Contains(got, "go install ./cmd/ochatd") || !strings.Contains(got, "`go run ./cmd/ochatd chat") {
		t.Errorf("not on PATH: %q", got)
	}
}
