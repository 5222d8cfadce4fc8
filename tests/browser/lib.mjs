// Helpers the WebUI flows share (this file is outside flows/, so it is not run as a flow).

/** Presses Tab from the top of the page until the nav link `label` has the focus. */
export async function tabToNavLink(page, label) {
  for (let i = 0; i < 25; i++) {
    await page.keyboard.press('Tab');
    const at = await page.evaluate(() => {
      const a = document.activeElement;
      return a && a.closest('nav') && a.tagName === 'A' ? a.textContent.trim() : null;
    });
    if (at && at.endsWith(label)) return;
  }
  throw new Error(`Tab never reached the ${label} link of the nav`);
}
