package daemon

import "github.com/ochat-dev/ochat/transcript"

// renderHandoff renders the earlier turns an agent's session has not seen as
// one text block; "" when there are none or nothing renders them yet.
//
// Issue 5 seam: transcript's handoff renderer (budget, summaries) plugs in
// here; until it exists a new session gets just the user's text.
func renderHandoff(unseen []transcript.Message) string {
	_ = unseen
	return ""
}
