/**
 * Pure helpers over unified diffs (the `diff` field of a fileChange segment).
 */

/**
 * sidesFromUnifiedDiff rebuilds the before and after texts covered by a
 * unified diff's hunks (context and removed lines / context and added lines).
 * Text outside the hunks is unknown, so the result shows hunks only.
 */
export function sidesFromUnifiedDiff(diff: string): { before: string; after: string } {
  const before: string[] = [];
  const after: string[] = [];
  let inHunk = false;
  for (const line of diff.split('\n')) {
    if (line.startsWith('@@')) {
      if (before.length || after.length) {
        before.push('…');
        after.push('…');
      }
      inHunk = true;
      continue;
    }
    if (!inHunk || line.startsWith('\\')) continue;
    if (line.startsWith('+')) after.push(line.slice(1));
    else if (line.startsWith('-')) before.push(line.slice(1));
    else if (line.startsWith(' ') || line === '') {
      before.push(line.slice(1));
      after.push(line.slice(1));
    }
  }
  return { before: before.join('\n'), after: after.join('\n') };
}

/** DiffLine is one rendered line of a unified diff. */
export interface DiffLine {
  kind: 'add' | 'del' | 'ctx' | 'hunk' | 'meta';
  text: string;
}

/** parseUnifiedDiff classifies each line of a unified diff for display. */
export function parseUnifiedDiff(diff: string): DiffLine[] {
  const out: DiffLine[] = [];
  const lines = diff.split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  for (const line of lines) {
    if (line.startsWith('+++') || line.startsWith('---') || line.startsWith('diff ') || line.startsWith('index ')) out.push({ kind: 'meta', text: line });
    else if (line.startsWith('@@')) out.push({ kind: 'hunk', text: line });
    else if (line.startsWith('+')) out.push({ kind: 'add', text: line });
    else if (line.startsWith('-')) out.push({ kind: 'del', text: line });
    else out.push({ kind: 'ctx', text: line });
  }
  return out;
}

/**
 * lineDiff computes a unified-style line diff of a and b (LCS over lines,
 * O(n·m) memory bounded: above 4,000,000 cells it falls back to "all removed,
 * all added"). Used when a fileChange carries texts but no diff.
 */
export function lineDiff(a: string, b: string): DiffLine[] {
  const x = a === '' ? [] : a.split('\n');
  const y = b === '' ? [] : b.split('\n');
  const n = x.length;
  const m = y.length;
  if (n * m > 4_000_000) {
    return [...x.map((t) => ({ kind: 'del' as const, text: '-' + t })), ...y.map((t) => ({ kind: 'add' as const, text: '+' + t }))];
  }
  const dp: Uint32Array[] = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) dp[i][j] = x[i] === y[j] ? dp[i + 1][j + 1] + 1 : Math.max(dp[i + 1][j], dp[i][j + 1]);
  }
  const out: DiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) {
      out.push({ kind: 'ctx', text: ' ' + x[i] });
      i++;
      j++;
    } else if (dp[i + 1][j] >= dp[i][j + 1]) out.push({ kind: 'del', text: '-' + x[i++] });
    else out.push({ kind: 'add', text: '+' + y[j++] });
  }
  while (i < n) out.push({ kind: 'del', text: '-' + x[i++] });
  while (j < m) out.push({ kind: 'add', text: '+' + y[j++] });
  return out;
}
