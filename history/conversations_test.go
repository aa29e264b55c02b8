package history

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ochat-dev/ochat/transcript"
)

// The mark of a linked conversation moves with the messages it imported:
// Writer.SetNative inside Update is kept or dropped with them.
func TestWriterSetNative(t *testing.T) {
	mark := &NativeRef{Agent: "claude", SessionID: "s1", Path: "/p.jsonl", LastNativeID: "u9", LastMessageID: "M2",
		Count: 9, Size: 1234, ModTimeNs: 5, MarkedAt: 6}
	tests := []struct {
		name     string
		fail     error // returned by the Update function after its writes
		wantMark *NativeRef
		wantMsgs int
	}{
		{name: "committed", wantMark: mark, wantMsgs: 1},
		{name: "rolled back", fail: errors.New("abort"), wantMark: &NativeRef{Agent: "claude", SessionID: "s1"}, wantMsgs: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openTemp(t)
			if err := st.CreateConversation(Conversation{ID: "C1", Native: &NativeRef{Agent: "claude", SessionID: "s1"}}); err != nil {
				t.Fatal(err)
			}
			err := st.Update(func(w *Writer) error {
				c, err := w.Conversation("C1")
				if err != nil || c.Native == nil || c.Native.SessionID != "s1" {
					t.Fatalf("Writer.Conversation %+v %v", c, err)
				}
				if err := w.PutMessage("C1", transcript.Message{ID: "M2", Role: transcript.RoleUser, Content: "x"}, 7); err != nil {
					return err
				}
				if err := w.SetNative("C1", mark); err != nil {
					return err
				}
				return tt.fail
			})
			if !errors.Is(err, tt.fail) {
				t.Fatalf("update: %v", err)
			}
			c, err := st.Conversation("C1")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*c.Native, *tt.wantMark) {
				t.Fatalf("native %+v, want %+v", c.Native, tt.wantMark)
			}
			if msgs, _ := st.Messages("C1"); len(msgs) != tt.wantMsgs {
				t.Fatalf("%d messages, want %d", len(msgs), tt.wantMsgs)
			}
		})
	}
	st := openTemp(t)
	err := st.Update(func(w *Writer) error { return w.SetNative("nope", mark) })
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("SetNative of an unknown conversation: %v", err)
	}
	b, _ := json.Marshal(mark)
	for _, k := range []string{`"lastNativeId"`, `"lastMessageId"`, `"count"`, `"size"`, `"modTimeNs"`, `"markedAt"`} {
		if !strings.Contains(string(b), k) {
			t.Fatalf("NativeRef JSON %s lacks %s", b, k)
		}
	}
}
