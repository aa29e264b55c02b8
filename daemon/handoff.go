package daemon

import (
	"sort"

	"github.com/ochat-dev/ochat/transcript"
)

// renderHandoff renders the earlier messages an agent's session has not seen
// as one text block (transcript.RenderHandoff with the default budget,
// transcript.DefaultHandoffBudget bytes: the most recent messages whole,
// older ones summarised, the oldest omitted, and the block says what was
// cut); "" when there are none.
func renderHandoff(unseen []transcript.Message) string {
	if len(unseen) == 0 {
		return ""
	}
	return transcript.RenderHandoff(unseen, transcript.HandoffOptions{})
}

// unseenMessages returns the messages of earlier (the conversation before the
// turn's user message, in id order) that an agent's session has not seen:
// all of them for a fresh session, else those whose id sorts after cursor.
// Ids are ULIDs, so the comparison holds even when the cursor's own message
// was dropped; an empty cursor means the session has seen nothing.
func unseenMessages(earlier []transcript.Message, fresh bool, cursor string) []transcript.Message {
	if fresh || cursor == "" {
		return earlier
	}
	i := sort.Search(len(earlier), func(i int) bool { return earlier[i].ID > cursor })
	return earlier[i:]
}
