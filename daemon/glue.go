package daemon

import "github.com/ochat-dev/ochat/transcript"

// renderHandoff renders the earlier messages an agent's session has not seen
// as one text block (transcript.RenderHandoff, default budget); "" when
// there are none.
func renderHandoff(unseen []transcript.Message) string {
	if len(unseen) == 0 {
		return ""
	}
	return transcript.RenderHandoff(unseen, transcript.HandoffOptions{})
}
