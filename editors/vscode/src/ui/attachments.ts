/**
 * Pasted images as workspace files. ochat/chat/send takes attachments by
 * path and the daemon reads them only inside the workspace (an image kept in
 * the extension's storage would be refused: "… is outside the workspace");
 * it then keeps its own content-addressed copy in its store and sends the
 * image to the agent as an ACP image block when the agent accepts images
 * (daemon/attachments.go, docs/protocol.md "Attachments").
 * So images go to <workspace>/.ochat/attachments/, content-addressed, and a
 * .ochat/.gitignore keeps them out of git. Node fs only (no vscode), so the
 * unit tests use it as is.
 */
import { createHash } from 'node:crypto';
import { mkdir, writeFile, access } from 'node:fs/promises';
import { join } from 'node:path';

/** ATTACHMENTS_DIR is where pasted images live, relative to the workspace. */
export const ATTACHMENTS_DIR = '.ochat/attachments';

/** GITIGNORE is the .ochat/.gitignore written when the workspace has none: the attachments only (settings.json stays tracked). */
export const GITIGNORE = '# written by the ochat VS Code extension: pasted images\nattachments/\n';

/**
 * saveWorkspaceAttachment writes data (an image of mimeType, e.g. image/png)
 * to <workspace>/.ochat/attachments/<first 32 hex digits of sha256>.<ext> and
 * returns that absolute path; the same image pasted twice is one file. It
 * writes .ochat/.gitignore when missing and never overwrites an existing one.
 * Errors are the file system's, wrapped with the path.
 */
export async function saveWorkspaceAttachment(workspace: string, data: Uint8Array, mimeType: string): Promise<string> {
  const ext = mimeType.split('/')[1]?.split('+')[0]?.replace(/[^a-z0-9]/gi, '') || 'png';
  const dir = join(workspace, ATTACHMENTS_DIR);
  const file = join(dir, `${createHash('sha256').update(data).digest('hex').slice(0, 32)}.${ext}`);
  try {
    await mkdir(dir, { recursive: true });
    const ignore = join(workspace, '.ochat', '.gitignore');
    if (!(await exists(ignore))) await writeFile(ignore, GITIGNORE, { flag: 'wx' }).catch((e) => { if (e.code !== 'EEXIST') throw e; });
    if (!(await exists(file))) await writeFile(file, data);
  } catch (err) {
    throw new Error(`save pasted image to ${file}: ${(err as Error).message}`, { cause: err });
  }
  return file;
}

async function exists(p: string): Promise<boolean> {
  try {
    await access(p);
    return true;
  } catch {
    return false;
  }
}
