import { useEffect } from "react";

/**
 * A table that scrolls sideways (on a phone every wide table does, styles.css) must be reachable by
 * keyboard to be scrolled (WCAG 2.1.1). Tables are written in many pages, so the shell watches its main
 * region and gives each table that overflows a tab stop, and takes it back when it fits again.
 */
export function useScrollableTablesFocusable(root: () => HTMLElement | null): void {
  useEffect(() => {
    const el = root();
    if (!el) return;
    const update = () => {
      for (const t of el.querySelectorAll<HTMLTableElement>("table")) {
        const scrolls = t.scrollWidth > t.clientWidth + 1;
        if (scrolls && t.tabIndex !== 0) t.tabIndex = 0;
        else if (!scrolls && t.hasAttribute("tabindex")) t.removeAttribute("tabindex");
      }
    };
    // One pass per batch of changes or resizes; reading the sizes lays the page out at most once for it.
    const mutations = new MutationObserver(update);
    mutations.observe(el, { childList: true, subtree: true });
    const sizes = new ResizeObserver(update);
    sizes.observe(el);
    update();
    return () => {
      mutations.disconnect();
      sizes.disconnect();
    };
  }, [root]);
}
