// Drives the studio page in headless Chromium (Playwright, given by
// PLAYWRIGHT_CORE): opens a table, clicks a row, edits its JSON and saves;
// then another writer changes the row, and a second save from the page
// must show a conflict and write nothing. Screenshots go to SHOTS.
// Usage: node edit.cjs <studio address with its token>
"use strict";
const { chromium } = require(process.env.PLAYWRIGHT_CORE);

// What the page said after a save or a delete.
async function answer(page) {
  await page.waitForFunction(() => document.getElementById("edit-message").textContent !== "");
  return page.locator("#edit-message").textContent();
}

async function main() {
  const url = process.argv[2];
  const shots = process.env.SHOTS;
  const token = new URL(url).searchParams.get("token");
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    page.on("pageerror", (error) => console.error("the page: " + error));
    page.on("console", (message) => console.error("the page's console: " + message.text()));
    await page.goto(url + "#table=Orders");
    // Pages through the rows: the second page starts where the first ended.
    await page.locator("#message", { hasText: "100 rows; more follow" }).waitFor();
    await page.click("#next");
    await page.locator("#page-info", { hasText: "Page 2" }).waitFor();
    await page.getByRole("cell", { name: "o0100", exact: true }).waitFor();
    await page.click("#first");
    await page.locator("#page-info", { hasText: "Page 1" }).waitFor();
    await page.getByRole("cell", { name: "o0003", exact: true }).click();
    const editor = page.locator("#edit-json");
    await editor.waitFor();
    const json = await editor.inputValue();
    if (!json.includes('"Total":"3"')) throw new Error("the row shown: " + json);
    await editor.fill(json.replace('"Total":"3"', '"Total":"33"'));
    await page.click("#save");
    const said = await answer(page);
    if (said !== "Saved.") throw new Error("the save: " + said);
    await page.screenshot({ path: shots + "/edited.png" });

    // Another writer changes the row behind the page's back.
    const api = new URL(url);
    api.pathname = "/api/row";
    api.search = new URLSearchParams({ table: "Orders", pk: "c0", rk: "o0003" }).toString();
    const headers = { "X-Studio-Token": token };
    const read = await (await fetch(api, { headers })).json();
    const theirs = read.json.replace('"Total":"33"', '"Total":"44"');
    const put = await fetch(api, { method: "PUT", headers: Object.assign({ "If-Match": read.etag }, headers), body: theirs });
    if (put.status !== 200) throw new Error("the other writer: " + put.status);

    // The page still holds the version it showed: its save is a conflict.
    const shown = await editor.inputValue();
    await editor.fill(shown.replace('"Total":"33"', '"Total":"55"'));
    await page.evaluate(() => { document.getElementById("edit-message").textContent = ""; });
    await page.click("#save");
    const conflict = await answer(page);
    if (!conflict.startsWith("Conflict")) throw new Error("the second save: " + conflict);
    await page.screenshot({ path: shots + "/conflict.png" });
    const after = await (await fetch(api, { headers })).json();
    if (!after.json.includes('"Total":"44"')) throw new Error("the conflict wrote: " + after.json);
    // A partition key clicked in the rows shows that partition alone.
    await page.getByRole("cell", { name: "c1", exact: true }).first().click();
    await page.waitForFunction(() => document.getElementById("filter").value === "PartitionKey eq 'c1'");
    await page.locator("#message", { hasText: "83 rows" }).waitFor();
    // So does one picked from the list of partitions.
    await page.getByRole("button", { name: "c2", exact: true }).click();
    await page.waitForFunction(() => document.getElementById("filter").value === "PartitionKey eq 'c2'");
    await page.getByRole("cell", { name: "o0002", exact: true }).waitFor();
    await page.locator("#message", { hasText: "83 rows" }).waitFor();
    // The index rows of a partition, verified in one click.
    await page.goto(url + "#table=Tickets&filter=" + encodeURIComponent("PartitionKey eq 'b'"));
    await page.getByRole("cell", { name: "TICKET_0000000001", exact: true }).click();
    await page.click("#verify");
    await page.locator("#audit-summary", { hasText: "1 out of step" }).waitFor();
    await page.screenshot({ path: shots + "/verified.png" });
    console.log("edited, and the conflict was refused");
  } finally {
    await browser.close();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
