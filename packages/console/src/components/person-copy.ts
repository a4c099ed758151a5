/**
 * Copying a person's name copies the full name and email (issue 43, item 4; docs/console.md): the page
 * shows the display name, the element carries the full form in `data-copy`. No imports, so the shell
 * can install it without loading the pages' code.
 */

/** Marks an element whose copied text is its `data-copy`. */
export const COPY_ATTR = "data-copy";

/**
 * The text a copy of the selection gives when it touches a person, or undefined when it touches none
 * (the browser's own copy then stands). A selection inside one name (a double-click) copies that
 * person's full name and email; a wider one (a row) has each name it holds whole replaced, in order,
 * keeping the browser's own text (tabs, line breaks) around them.
 */
export function copyPeopleInFull(selection: Selection): string | undefined {
  if (selection.rangeCount === 0 || selection.isCollapsed) return undefined;
  const range = selection.getRangeAt(0);
  const start = range.commonAncestorContainer;
  const inside = (start instanceof Element ? start : start.parentElement)?.closest(`[${COPY_ATTR}]`);
  if (inside) return inside.getAttribute(COPY_ATTR) ?? undefined;
  const root = start instanceof Element ? start : start.parentElement;
  const people = [...(root?.querySelectorAll(`[${COPY_ATTR}]`) ?? [])].filter((el) =>
    range.intersectsNode(el),
  );
  if (people.length === 0) return undefined;
  const text = selection.toString();
  let out = "";
  let from = 0;
  for (const el of people) {
    const shown = el.textContent ?? "";
    const at = shown ? text.indexOf(shown, from) : -1;
    if (at < 0) continue; // partly selected: the part copied is what was selected
    out += text.slice(from, at) + (el.getAttribute(COPY_ATTR) ?? shown);
    from = at + shown.length;
  }
  return out + text.slice(from);
}

/** Installed once by the shell: copying a name copies the full name and email (issue 43, item 4). */
export function installPersonCopy(doc: Document): () => void {
  const onCopy = (ev: ClipboardEvent) => {
    const sel = doc.getSelection();
    const text = sel ? copyPeopleInFull(sel) : undefined;
    if (text === undefined || !ev.clipboardData) return;
    ev.clipboardData.setData("text/plain", text);
    ev.preventDefault();
  };
  doc.addEventListener("copy", onCopy);
  return () => doc.removeEventListener("copy", onCopy);
}
