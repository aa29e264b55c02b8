package agents

import (
	"testing"

	"github.com/ochat-dev/ochat/transcript"
)

// TestPermissionToolDoesNotGoBack: a permission request whose toolCall
// says "pending" of a tool already running leaves it running (the demo
// showed running → pending); a tool first seen in the request is pending.
func TestPermissionToolDoesNotGoBack(t *testing.T) {
	for _, tt := range []struct {
		name, before, perm, want string
	}{
		{"running stays running", `{"sessionUpdate":"tool_call","toolCallId":"t","title":"Write","status":"in_progress"}`, `{"toolCallId":"t","status":"pending"}`, string(transcript.ToolRunning)},
		{"pending stays pending", `{"sessionUpdate":"tool_call","toolCallId":"t","title":"Write","status":"pending"}`, `{"toolCallId":"t","status":"pending"}`, string(transcript.ToolPending)},
		{"first seen in the request", "", `{"toolCallId":"t","status":"pending"}`, string(transcript.ToolPending)},
		{"request may move it on", `{"sessionUpdate":"tool_call","toolCallId":"t","status":"pending"}`, `{"toolCallId":"t","status":"in_progress"}`, string(transcript.ToolRunning)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := newMapper(fakeClock(), "/w")
			if tt.before != "" {
				u, err := decodeUpdate([]byte(tt.before))
				if err != nil {
					t.Fatal(err)
				}
				m.apply(u, true)
			}
			u, err := decodeUpdate([]byte(tt.perm))
			if err != nil {
				t.Fatal(err)
			}
			tool, _, evs := m.mergePermissionTool(u)
			if tool.Status != tt.want {
				t.Errorf("tool status %q, want %q", tool.Status, tt.want)
			}
			for _, ev := range evs {
				if ev.Segment.Type == transcript.SegTool && ev.Segment.Status != tt.want {
					t.Errorf("event status %q, want %q", ev.Segment.Status, tt.want)
				}
			}
		})
	}
}
