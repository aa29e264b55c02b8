package daemon

import (
	"errors"
	"strings"
	"testing"

	"go.lsp.dev/jsonrpc2"
)

// TestRenameParamsValidate: a rename needs a conversation id and a title
// that is not blank.
func TestRenameParamsValidate(t *testing.T) {
	str := func(s string) *string { return &s }
	tests := []struct {
		name string
		p    RenameParams
		want string // "" for valid
	}{
		{"ok", RenameParams{ConversationID: "01A", Title: str("fix the parser")}, ""},
		{"padded ok", RenameParams{ConversationID: "01A", Title: str("  x ")}, ""},
		{"no id", RenameParams{Title: str("t")}, "conversationId is required"},
		{"no title", RenameParams{ConversationID: "01A"}, "title is required"},
		{"empty title", RenameParams{ConversationID: "01A", Title: str("")}, "title is blank"},
		{"blank title", RenameParams{ConversationID: "01A", Title: str(" \t\n")}, "title is blank"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("validate: %v", err)
				}
				return
			}
			var je *jsonrpc2.Error
			if !errors.As(err, &je) || je.Code != jsonrpc2.InvalidParams || !strings.Contains(je.Message, tt.want) {
				t.Fatalf("validate = %v, want InvalidParams with %q", err, tt.want)
			}
		})
	}
}
